"""The dependency pass (opgen.kernel.kir_sync): on random straight-line programs every conflicting access pair is
ordered afterwards, checked pair by pair against an independent brute-force happens-before (the rules of
opgen/emu/include/EMU.md "Pipes and races" as a graph), and each placed sync is needed; on random looped programs
and the hand-built kernels the interpreter (the emulation's vector-clock model) runs race-free, and the mutation
test: deleting any one placed sync makes it fault with a race."""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from opgen.check.kirengine import kernel_classes
from opgen.ir.dims import Bin, Constraint, Lit, Sym
from opgen.kernel import kir
from opgen.kernel import kir_interp as ki
from opgen.kernel import kir_sync as ks
from opgen.kernel.isa import Op, Pipe
from opgen.kernel.kir import (Alloc, Assign, Barrier, Call, Copy, DeQue, EnQue, FConst, For, Free, Func, Get,
                              GetValue, GmTensor, GmView, If, InitBuffer, KernelClass, Let, Local, Param, Ref,
                              ScalarVar, SetFlag, SetValue, StructDecl, StructLet, StructSet, TensorVar, TPos,
                              WaitFlag, vec)
from opgen.registry import load_spec

from kir_programs import scale_rows, softmax_rows, sync_all_kernel
from test_kir import rows_kernel

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "specs"
NBLK = 4          # blocks of 8 floats (32 B) in the random programs' buffer
_NAMES = itertools.count()


def _random_ops(rng, n):
    ops = []
    for i in range(n):
        kind = rng.choice(["in", "out", "add", "get", "set"])
        b, c = (int(v) for v in rng.integers(0, NBLK, 2))
        if kind == "in":
            ops.append(Copy(Ref("t", Lit(8 * b)), GmView("gmX", Lit(8 * b)), Lit(1), Lit(32)))
        elif kind == "out":
            ops.append(Copy(GmView("gmY", Lit(8 * b)), Ref("t", Lit(8 * b)), Lit(1), Lit(32)))
        elif kind == "add":
            ops.append(vec(Op.ADDS, dst=Ref("t", Lit(8 * b)), src0=Ref("t", Lit(8 * c)), scalar=1.0, count=8))
        elif kind == "get":
            ops.append(GetValue(f"g{next(_NAMES)}", Ref("t", Lit(8 * b + int(rng.integers(0, 8))))))
        else:
            ops.append(SetValue(Ref("t", Lit(8 * b)), FConst(float(i))))
    return tuple(ops)


def _program(ops, loop: bool) -> KernelClass:
    body = (For("it", Lit(0), Lit(3), Lit(1), ops),) if loop else ops
    process = (InitBuffer("b", Lit(32 * NBLK)), Get("t", "b", "float"),
               Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32 * NBLK))) + body
    return KernelClass("Rnd", "RndTiling", args=("x", "y"),
                       gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")),
                       locals=(Local("b"),), tensors=(TensorVar("t", "float"),), process=process)


def _run(k):
    gm = {"x": np.arange(8 * NBLK, dtype=np.float32), "y": np.zeros(8 * NBLK, np.float32)}
    return ki.run(k, {}, gm, 1)


# ------------------------------------------------------------------------------------------------ the definition
def _events(stmts):
    """(kind, pipe / pipes, write, block) per statement of a straight-line random program."""
    out = []
    for s in stmts:
        if isinstance(s, Copy):
            ub = s.dst if isinstance(s.src, GmView) else s.src
            n = 1 if s.block_len == Lit(32) else NBLK
            blocks = set(range(ub.offset.value // 8, ub.offset.value // 8 + n))
            out.append(("acc", s.pipe, [(blocks, isinstance(s.src, GmView))]))
        elif s.__class__.__name__ == "Vec":
            a = dict(s.args)
            out.append(("acc", Pipe.V, [({a["src0"].offset.value // 8}, False), ({a["dst"].offset.value // 8}, True)]))
        elif isinstance(s, GetValue):
            out.append(("acc", Pipe.S, [({s.src.offset.value // 8}, False)]))
        elif isinstance(s, SetValue):
            out.append(("acc", Pipe.S, [({s.dst.offset.value // 8}, True)]))
        elif isinstance(s, (Barrier, SetFlag, WaitFlag)):
            out.append((type(s).__name__, s, None))
    return out


def _on(e, pipe) -> bool:
    """Whether event e occupies pipe's program order."""
    kind, x, _ = e
    if kind == "acc":
        return x is pipe
    if kind == "Barrier":
        return x.pipe is pipe
    if kind == "SetFlag":
        return x.src is pipe
    return x.dst is pipe     # WaitFlag


def _violations(stmts) -> list:
    """Conflicting access pairs (i, j) of a straight-line program with no happens-before path from i to j. The
    graph: program order on each in-order pipe; on V only through a barrier, a wait on V or a set from V; set ->
    its wait; a wait on S and a PIPE_ALL barrier order everything after them; a scalar read is never overtaken
    (no write-after-read against it) but orders nothing else (the S pipe's earlier writes stay posted)."""
    ev = _events(stmts)
    n = len(ev)
    succ = [set() for _ in range(n)]
    for i in range(n):
        ki_, x, acc = ev[i]
        if ki_ == "acc" and x is Pipe.S and not acc[0][1]:
            continue     # a scalar read is synchronous (never overtaken) but orders nothing else
        for j in range(i + 1, n):
            kj, y, _ = ev[j]
            for p in ks.PIPES:
                if kj == "WaitFlag" and y.dst is Pipe.S:
                    continue     # a wait on S carries its SetFlag's token to every pipe, not S's own posted work
                if _on(ev[i], p) and _on(ev[j], p):
                    if p is not Pipe.V or ki_ in ("Barrier", "WaitFlag") or kj in ("Barrier", "SetFlag"):
                        succ[i].add(j)
            if ki_ == "SetFlag" and kj == "WaitFlag" and (x.event, x.id) == (y.event, y.id):
                if not any(ev[m][0] == "WaitFlag" and (ev[m][1].event, ev[m][1].id) == (x.event, x.id)
                           for m in range(i + 1, j)):
                    succ[i].add(j)
            if (ki_ == "WaitFlag" and x.dst is Pipe.S) or (ki_ == "Barrier" and x.pipe is Pipe.ALL):
                succ[i].add(j)
            if kj == "Barrier" and y.pipe is Pipe.ALL:
                succ[i].add(j)
    reach = [set() for _ in range(n)]
    for i in reversed(range(n)):
        for j in succ[i]:
            reach[i] |= {j} | reach[j]
    bad = []
    for i in range(n):
        for j in range(i + 1, n):
            if ev[i][0] != "acc" or ev[j][0] != "acc":
                continue
            clash = any(bi & bj and (wi or wj) for bi, wi in ev[i][2] for bj, wj in ev[j][2])
            if ev[i][1] is Pipe.S and not ev[i][2][0][1]:
                clash = False    # write after a scalar read: the read is done before anything later issues
            if clash and j not in reach[i] and not (ev[i][1] is ev[j][1] and ev[i][1] is not Pipe.V):
                bad.append((i, j))
    return bad


@pytest.mark.parametrize("seed", range(30))
def test_random_straight_line_programs_pair_by_pair(seed):
    rng = np.random.default_rng(seed)
    k0 = _program(_random_ops(rng, 12), loop=False)
    k, ins = ks.place_syncs(k0)
    assert _violations(k.process[2:]) == []
    assert _run(k).ok, _run(k).first_fault
    assert bool(_violations(k0.process[2:])) == bool(ins)
    for w in ks.placed(ins):                                      # every placed sync is needed
        m = ks.without(k0, ins, w)
        bad = _violations(m.process[2:])
        assert bad, w
        r = _run(m)
        ev = _events(m.process[2:])
        # The emulation's shadow keeps one (the latest) reader per pipe and block, so a V write after two
        # unordered V reads of the block checks only the later read: a V -> V write-after-read can go unseen.
        shadowed = all(ev[i][1] is Pipe.V and ev[j][1] is Pipe.V for i, j in bad)
        assert (not r.ok and "race" in r.first_fault) or shadowed, (w, r.first_fault)


@pytest.mark.parametrize("seed", range(20))
def test_random_looped_programs_race_free_and_every_sync_needed(seed):
    rng = np.random.default_rng(100 + seed)
    k0 = _program(_random_ops(rng, 8), loop=True)
    k, ins = ks.place_syncs(k0)
    r = _run(k)
    assert r.ok, r.first_fault
    for w in ks.placed(ins):
        r = _run(ks.without(k0, ins, w))
        assert not r.ok and "race" in r.first_fault, (w, r.first_fault)


def _branchy_program(rng, depth: int) -> KernelClass:
    """A loop of 4 iterations: random ops, an If on the iteration's parity with random ops in each branch, and a
    pipeline step through a double-buffered VECIN queue (copy in, hand-off, a V op into the TBuf); depth 2 nests
    another such loop in the then-branch."""
    def step(d):
        pipe_ = (Alloc("qt", "q", "float"), Copy(Ref("qt"), GmView("gmX", Lit(8 * int(rng.integers(0, NBLK)))),
                                                  Lit(1), Lit(32)),
                 EnQue("q", "qt"), DeQue("qt", "q", "float"),
                 vec(Op.ADD, dst=Ref("t", Lit(8 * int(rng.integers(0, NBLK)))), src0="qt",
                     src1=Ref("t", Lit(8 * int(rng.integers(0, NBLK)))), count=8),
                 Free("q", "qt"))
        then = _random_ops(rng, 3)
        if d > 1:
            then = then + (For(f"it{d - 1}", Lit(0), Lit(2), Lit(1), step(d - 1)),)
        var = f"it{d}"
        return _random_ops(rng, 3) + (If((Constraint("==", Sym(var) % 2, Lit(0)),), then, _random_ops(rng, 3)),) + \
            pipe_ + _random_ops(rng, 2)

    body = step(depth)
    process = (InitBuffer("b", Lit(32 * NBLK)), Get("t", "b", "float"), InitBuffer("q", Lit(32), 2),
               Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32 * NBLK)), For(f"it{depth}", Lit(0), Lit(4), Lit(1), body))
    return KernelClass("Rnd", "RndTiling", args=("x", "y"),
                       gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")),
                       locals=(Local("b"), Local("q", TPos.VECIN, True, 2)), tensors=(TensorVar("t", "float"),),
                       process=process)


@pytest.mark.parametrize("seed", range(4))
def test_random_programs_with_branches_and_a_double_buffered_queue_run_race_free(seed):
    # Soundness only: the analysis is path-insensitive (it joins the branches of every iteration), so on
    # parity-driven branches a placed sync may guard a path no run takes; minimality is shown where the analysis
    # is exact (the straight-line and branch-free tests above, the hand-built kernels below).
    rng = np.random.default_rng(500 + seed)
    k0 = _branchy_program(rng, 1 + seed % 2)
    k, ins = ks.place_syncs(k0)
    assert ks.conflicts(k) == []
    r = _run(k)
    assert r.ok, r.first_fault


def test_a_double_buffered_queue_needs_no_flag_between_its_pipes():
    body = (Alloc("qt", "q", "float"), Copy(Ref("qt"), GmView("gmX"), Lit(1), Lit(32)), EnQue("q", "qt"),
            DeQue("qt", "q", "float"), vec(Op.ADDS, dst=Ref("t"), src0="qt", scalar=1.0, count=8), Free("q", "qt"),
            Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(32)))
    k0 = KernelClass("Pipe2", "RndTiling", args=("x", "y"),
                     gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")),
                     locals=(Local("b"), Local("q", TPos.VECIN, True, 2)), tensors=(TensorVar("t", "float"),),
                     process=(InitBuffer("b", Lit(32 * NBLK)), Get("t", "b", "float"), InitBuffer("q", Lit(32), 2),
                              For("it", Lit(0), Lit(4), Lit(1), body)))
    k, ins = ks.place_syncs(k0)
    events = sorted(s.event for v in ins.values() for s in v if isinstance(s, SetFlag))
    assert events == ["MTE3_V", "V_MTE3"], events       # the copy out reads t; the next Adds overwrites it
    assert not any(isinstance(s, Barrier) for v in ins.values() for s in v)
    assert _run(k).ok
    for w in ks.placed(ins):
        r = _run(ks.without(k0, ins, w))
        assert not r.ok and "race" in r.first_fault, (w, r.first_fault)


# ------------------------------------------------------------------------------------------------ hand-built kernels
def test_the_hand_synchronised_rows_kernel_has_no_conflict_and_stripped_it_has_each_kind():
    assert ks.conflicts(rows_kernel()) == []
    text = "\n".join(str(c) for c in ks.conflicts(ks.strip_syncs(rows_kernel())))
    for want in ("read-after-write V Compute@2.b.0 -> V Compute@2.b.1",      # Muls -> Adds through o
                 "read-after-write V Compute@2.b.2 -> S Compute@2.b.3",      # ReduceSum -> GetValue through red
                 "read-after-write S Compute@2.b.4 -> MTE3 CopyOut@3",       # SetValue -> copy of stage
                 "write-after-read MTE3 CopyOut@3 -> S Compute@2.b.4"):      # next pass's SetValue over stage
        assert want in text, text


def test_the_pass_places_what_the_rows_kernel_needs_and_no_loop_edge_barrier():
    k, ins = ks.place_syncs(ks.strip_syncs(rows_kernel()), hoist=ks.Hoist.NONE)
    got = {p: [type(s).__name__ + (f" {s.event}" if hasattr(s, "event") else f" {s.pipe.name}") for s in v]
           for p, v in ins.items()}
    assert got == {("Compute", 2, "b", 1): ["Barrier V"],                      # Adds reads Muls' o
                   ("Compute", 2, "b", 2): ["Barrier V"],                      # ReduceSum reads Adds' o
                   ("Compute", 2, "b", 3): ["SetFlag V_S", "WaitFlag V_S"],     # GetValue reads ReduceSum's red
                   # SetValue over stage copied out by the previous pass's CopyOut: before the call of Compute in
                   # the pass loop, where the two paths part (once a pass, not per row)
                   ("Process", 10, "b", 1): ["SetFlag MTE3_S", "WaitFlag MTE3_S"],
                   ("Process", 10, "b", 2): ["SetFlag S_MTE3", "WaitFlag S_MTE3"]}  # copy out of SetValue's stage
    assert ks.conflicts(k) == []


def test_hoisting_moves_each_set_flag_to_just_after_what_it_must_cover():
    k, ins = ks.place_syncs(ks.strip_syncs(rows_kernel()))
    got = {p: [(type(s).__name__, s.event, s.id) for s in v if isinstance(s, (SetFlag, WaitFlag))]
           for p, v in ins.items()}
    # MTE3 read stage in the previous pass's CopyOut: its pair goes before this pass's call of Compute, its SetFlag
    # moves up to open the pass (after the CopyOut it must cover, before CopyIn); S wrote stage in Compute: its pair
    # before the call of CopyOut, nothing between to skip.
    assert got[("Process", 10, "b", 0)] == [("SetFlag", "MTE3_S", 7)]
    assert got[("Process", 10, "b", 1)] == [("WaitFlag", "MTE3_S", 7)]
    assert got[("Process", 10, "b", 2)] == [("SetFlag", "S_MTE3", 0), ("WaitFlag", "S_MTE3", 0)]
    assert got[("Compute", 2, "b", 3)] == [("SetFlag", "V_S", 0), ("WaitFlag", "V_S", 0)]   # nothing to skip
    assert ks.conflicts(k) == []
    gm = {"x": np.ones((13, 37), np.float32), "y": np.zeros((13, 37), np.float32), "s": np.zeros(13, np.float32)}
    assert ki.run(k, dict(rows=13, hidden=37, colAlign=40, rowsPerCore=5, **{"pass": 2}), gm, 3).ok


@pytest.mark.parametrize("make, types, tiling, gm, cores, ws", [
    (lambda: ks.strip_syncs(rows_kernel()), {}, dict(rows=13, hidden=37, colAlign=40, rowsPerCore=5, **{"pass": 2}),
     lambda: {"x": np.ones((13, 37), np.float32), "y": np.zeros((13, 37), np.float32), "s": np.zeros(13, np.float32)},
     3, None),
    (softmax_rows, {"T": "half"}, dict(rows=7, cols=45, colAlign=48, rowsPerCore=4),
     lambda: {"x": np.linspace(-2, 2, 7 * 45).astype(np.float16), "y": np.zeros(7 * 45, np.float16)}, 2, None),
    (softmax_rows, {"T": "float"}, dict(rows=5, cols=70, colAlign=72, rowsPerCore=3),
     lambda: {"x": np.linspace(-2, 2, 5 * 70).astype(np.float32), "y": np.zeros(5 * 70, np.float32)}, 2, None),
    (sync_all_kernel, {}, {"per": 24}, lambda: {"x": np.ones(72, np.float32), "s": np.zeros(1, np.float32)}, 3,
     lambda: np.zeros(8, np.float32)),
    (scale_rows, {}, dict(rows=5, cols=20, colAlign=24),
     lambda: {"x": np.linspace(-2, 2, 100).astype(np.float32), "y": np.zeros(100, np.float16)}, 1, None),
], ids=["rows", "softmax-half", "softmax-float", "sync-all", "scale-template-fload"])
def test_mutation_deleting_any_placed_sync_is_a_race(make, types, tiling, gm, cores, ws):
    k0 = make()
    k, ins = ks.place_syncs(k0, types)
    assert ins

    def run(kk):
        return ki.run(kk, tiling, gm(), cores, types=types, workspace=ws() if ws else None)

    r = run(k)
    assert r.ok, r.first_fault
    for w in ks.placed(ins):
        r = run(ks.without(k0, ins, w))
        assert not r.ok and "race" in r.first_fault, (w, r.first_fault)


def test_existing_syncs_are_honoured_and_flag_ids_do_not_collide():
    ops = (Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32)), SetFlag(Pipe.MTE2, Pipe.V, 0),
           vec(Op.ADDS, dst=Ref("t", Lit(8)), src0=Ref("t", Lit(8)), scalar=1.0, count=8),
           Copy(Ref("t", Lit(16)), GmView("gmX"), Lit(1), Lit(32)),
           vec(Op.ADDS, dst=Ref("t", Lit(24)), src0=Ref("t", Lit(16)), scalar=1.0, count=8),
           WaitFlag(Pipe.MTE2, Pipe.V, 0),
           vec(Op.ADDS, dst=Ref("t", Lit(8)), src0=Ref("t"), scalar=1.0, count=8))
    k0 = _program(ops, loop=False)
    k, ins = ks.place_syncs(k0)
    placed = [s for v in ins.values() for s in v]
    assert any(isinstance(s, SetFlag) and s.event == "MTE2_V" and s.id == 1 for s in placed), placed
    assert _run(k).ok


@pytest.mark.parametrize("loop", [False, True])
def test_a_gm_round_trip_inside_a_core_gets_mte3_mte2_and_each_placed_sync_is_needed(loop):
    """A tile stored to gmY by MTE3 and loaded back by MTE2 on the same core: the detector's per-core GM shadow
    (EMU.md "Pipes and races") needs MTE3_MTE2 between them; the pass places it, and deleting any placed sync is
    a race in the interpreter."""
    ops = (Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(32)),
           Copy(Ref("t", Lit(8)), GmView("gmY"), Lit(1), Lit(32)),
           vec(Op.ADDS, dst=Ref("t", Lit(16)), src0=Ref("t", Lit(8)), scalar=1.0, count=8),
           Copy(GmView("gmX", Lit(16)), Ref("t", Lit(16)), Lit(1), Lit(32)))
    k0 = _program(ops, loop=loop)
    k, ins = ks.place_syncs(k0)
    placed = [s for v in ins.values() for s in v]
    assert any(isinstance(s, SetFlag) and s.event == "MTE3_MTE2" for s in placed), placed
    gm = {"x": np.arange(8 * NBLK, dtype=np.float32), "y": np.zeros(8 * NBLK, np.float32)}
    r = ki.run(k, {}, gm, 1)
    assert r.ok, r.first_fault
    x0 = np.arange(8, dtype=np.float32)
    assert np.array_equal(gm["y"][:8], x0) and np.array_equal(gm["x"][16:24], x0 + 1)
    for w in ks.placed(ins):
        r = _run(ks.without(k0, ins, w))
        assert not r.ok and "race" in r.first_fault, (w, r.first_fault)


# ------------------------------------------------------------------------------------------------ emitted kernels
ROWS_SPECS = ["rms_norm", "group_norm", "batch_norm", "softmax", "layer_norm_grad", "swiglu", "cross_entropy_loss",
              "AdaLayerNormGrad", "NormRopeConcat", "NormRopeConcatGrad"]
"""Rows and head-rows kernels of every schedule: ROW_SPLIT batched and per row, COL_SPLIT with its cross-core
exchange, the streamed column split, per-segment operands (GroupNorm), two passes over the rows (BatchNorm), views of
one input (SwiGlu), the head parts with their Gather tables (NormRopeConcat)."""


@pytest.mark.parametrize("name", ROWS_SPECS)
def test_the_dependency_analysis_finds_the_rows_kernels_synchronised(name):
    """The syncs the rows and head-rows lowerings write leave no unordered conflict on chip (UB) under the analysis,
    in every kernel class; on GM the one it reports is the cross-core exchange's store of this core's totals and
    the next chunk's load of other rows of the workspace (GM is one region per buffer to the analysis, docstring)."""
    from opgen.check.kirengine import kernel_classes
    from opgen.registry import load_spec

    spec = load_spec(str(EXAMPLES / f"{name}.py") if name.islower() else name)
    classes = kernel_classes(spec)
    assert classes
    for k in classes:
        cs = ks.conflicts(k)
        assert [str(c) for c in cs if c.later.region.base[0] != "gm"] == [], k.name
        gm = {(c.earlier.pipe, c.later.pipe, c.later.write, c.later.region.base) for c in cs}
        assert gm <= {(Pipe.MTE3, Pipe.MTE2, False, ("gm", "<workspace>"))}, (k.name, gm)


# ------------------------------------------------------------------------------------------------ review cases
def _small(process, methods=(), **kw) -> KernelClass:
    """A one-TBuf program over t (NBLK blocks of 8 floats), tiling field n."""
    return KernelClass("Rv", "RvTiling", args=("x", "y"),
                       gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")), locals=(Local("b"),),
                       tensors=(TensorVar("t", "float"),), fields=("n",),
                       process=(InitBuffer("b", Lit(32 * NBLK)), Get("t", "b", "float")) + tuple(process),
                       methods=tuple(methods), **kw)


def _races(k, n=2) -> bool:
    r = ki.run(k, {"n": n}, {"x": np.arange(8 * NBLK, dtype=np.float32), "y": np.zeros(8 * NBLK, np.float32)}, 1)
    return not r.ok and "race" in r.first_fault


_COPY_K = Copy(Ref("t", Lit(8) * Sym("k")), GmView("gmX"), Lit(1), Lit(32))       # MTE2 writes block k of t
_READ0 = vec(Op.ADDS, dst=Ref("t", Lit(24)), src0=Ref("t"), scalar=1.0, count=8)   # V reads block 0


def _scoping_cases():
    m_param = Func("M", (Param("k"),), (_COPY_K,))
    m_loop = Func("M", (), (For("k", Lit(0), Sym("n"), Lit(1), (_COPY_K,)),))
    m_let = Func("M", (), (Let("k", Lit(0)), _COPY_K))
    unrolled = lambda body: For("k", Lit(1), Lit(2), Lit(1), body)   # noqa: E731 - k = 1 only
    yield "a method's int parameter named like the loop variable", \
        _small([unrolled((Call("M", (Lit(0),)),)), _READ0], [m_param])
    yield "a run-time loop of that name in a called method", _small([unrolled((Call("M"),)), _READ0], [m_loop])
    yield "a Let of that name in a called method", _small([unrolled((Call("M"),)), _READ0], [m_let])
    assigned = For("k", Lit(0), Lit(2), Lit(1), (Assign("k", Sym("k") + Lit(2)), _COPY_K))
    yield "the loop variable assigned in its body", \
        replace(_small([assigned, vec(Op.ADDS, dst=Ref("t", Lit(24)), src0=Ref("t", Lit(16)), scalar=1.0,
                                      count=8)]), scalars=(ScalarVar("k", "int64_t", 0),))


@pytest.mark.parametrize("case", range(4))
def test_an_unrolled_loop_variable_is_unknown_where_its_name_means_something_else(case):
    """Review: the value of an unrolled loop's variable leaked into a called method (a parameter, a loop or a Let
    of the same name) and past an Assign of it, so a region came out at the wrong constant offset and a real race
    was missed. Each program races on the interpreter; the analysis reports the conflict and the placed program
    runs race-free."""
    name, k = list(_scoping_cases())[case]
    assert _races(k), name
    assert ks.conflicts(k), name
    placed, _ = ks.place_syncs(k)
    assert not _races(placed), name


def test_a_later_run_of_an_access_is_not_covered_by_a_flag_set_before_it():
    """Review: an access recorded in a pending flag token was taken as ordered when the same statement ran again
    after the SetFlag (an unrolled loop; one method called twice). The hand-written loop races on the interpreter
    and the analysis says so; the pass on the unsynchronised loop places syncs under which it runs race-free."""
    cp = Copy(Ref("t", Lit(8) * Sym("i")), GmView("gmX"), Lit(1), Lit(32))
    sv = SetValue(Ref("t", Lit(16)), FConst(1.0))
    init = [Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32 * NBLK)), SetFlag(Pipe.MTE2, Pipe.S, 0),
            WaitFlag(Pipe.MTE2, Pipe.S, 0)]
    k = _small(init + [For("i", Lit(0), Lit(3), Lit(1), (SetFlag(Pipe.S, Pipe.MTE2, 0), sv,
                                                           WaitFlag(Pipe.S, Pipe.MTE2, 0), cp))])
    assert _races(k) and ks.conflicts(k)
    k0 = _small([Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32 * NBLK)), For("i", Lit(0), Lit(3), Lit(1), (sv, cp))])
    assert not _races(ks.place_syncs(k0)[0])


def _fuzz_op(rng, loop_vars):
    t = lambda b: Ref("t", Lit(8 * b))              # noqa: E731
    w = lambda a: Ref("w_", Lit(0), slot=Lit(a))    # noqa: E731
    kind = rng.choice(["in", "out", "add", "get", "set", "win", "wout", "wadd", "wmix", "q", "vin"])
    b, c = (int(v) for v in rng.integers(0, NBLK, 2))
    a, d = (int(v) for v in rng.integers(0, 2, 2))
    if kind == "vin" and loop_vars:    # an offset that depends on a loop variable
        return (Copy(Ref("t", Lit(8) * (Sym(str(rng.choice(loop_vars))) % Lit(NBLK))), GmView("gmX"), Lit(1),
                     Lit(32)),)
    kind = "q" if kind == "vin" else kind   # without a loop variable: the queue round trip
    return {"in": lambda: (Copy(t(b), GmView("gmX", Lit(8 * b)), Lit(1), Lit(32)),),
            "out": lambda: (Copy(GmView("gmY", Lit(8 * b)), t(b), Lit(1), Lit(32)),),
            "add": lambda: (vec(Op.ADDS, dst=t(b), src0=t(c), scalar=1.0, count=8),),
            "get": lambda: (GetValue(f"g{next(_NAMES)}", Ref("t", Lit(8 * b + int(rng.integers(0, 8))))),),
            "set": lambda: (SetValue(t(b), FConst(1.0)),),
            "win": lambda: (Copy(w(a), GmView("gmX"), Lit(1), Lit(32)),),
            "wout": lambda: (Copy(GmView("gmY", Lit(8 * b)), w(a), Lit(1), Lit(32)),),
            "wadd": lambda: (vec(Op.ADDS, dst=w(a), src0=w(d), scalar=1.0, count=8),),
            "wmix": lambda: (vec(Op.ADD, dst=t(b), src0=w(a), src1=t(c), count=8),),
            "q": lambda: (Alloc("qt", "q", "float"), Copy(Ref("qt"), GmView("gmX", Lit(8 * b)), Lit(1), Lit(32)),
                          EnQue("q", "qt"), DeQue("qt", "q", "float"),
                          vec(Op.ADD, dst=t(c), src0=Ref("qt"), src1=t(b), count=8), Free("q", "qt"))}[kind]()


def _fuzz_block(rng, depth, loop_vars, methods, nops):
    out = []
    for _ in range(nops):
        r = rng.random()
        if depth > 0 and r < 0.15:    # a loop of 1-3 constant iterations (unrolled) or of n (a fixed point)
            v = f"i{next(_NAMES)}"
            hi = Lit(int(rng.integers(1, 4))) if rng.random() < 0.5 else Sym("n")
            out.append(For(v, Lit(0), hi, Lit(1), _fuzz_block(rng, depth - 1, loop_vars + [v], methods, 3)))
        elif depth > 0 and r < 0.27:
            cond = (Constraint("==", Sym(str(rng.choice(loop_vars))) % Lit(2), Lit(0)),) if loop_vars else \
                (Constraint(">", Sym("n"), Lit(1)),)
            out.append(If(cond, _fuzz_block(rng, depth - 1, loop_vars, methods, 2),
                          _fuzz_block(rng, depth - 1, loop_vars, methods, 2)))
        elif depth > 0 and r < 0.35 and not loop_vars:
            name = f"M{next(_NAMES)}"
            methods.append(Func(name, (), _fuzz_block(rng, depth - 1, [], methods, 3)))
            out.append(Call(name))
        else:
            out += list(_fuzz_op(rng, loop_vars))
    return tuple(out)


def _fuzz_program(seed) -> KernelClass:
    """The reviewer's generator: loops unrolled and not, branches, methods, a double-buffered queue, a two-slot
    tensor array at a run-time stride, offsets depending on loop variables."""
    rng = np.random.default_rng(seed)
    methods: list = []
    body = _fuzz_block(rng, 2, [], methods, 7)
    w0, w1 = Ref("w_", Lit(0), slot=Lit(0)), Ref("w_", Lit(0), slot=Lit(1))
    init = (InitBuffer("b", Lit(32 * NBLK)), Get("t", "b", "float"), InitBuffer("q", Lit(32), 2),
            InitBuffer("wb", Lit(8) * Sym("stride")),
            For("k", Lit(0), Lit(2), Lit(1), (Get("w_", "wb", "float", offset=Sym("k") * Sym("stride"),
                                                  slot=Sym("k")),)),
            Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32 * NBLK)), Copy(w0, GmView("gmX"), Lit(1), Lit(32)),
            Copy(w1, GmView("gmX"), Lit(1), Lit(32)))
    return KernelClass("F", "FT", args=("x", "y"), gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")),
                       locals=(Local("b"), Local("q", TPos.VECIN, True, 2), Local("wb")),
                       tensors=(TensorVar("t", "float"), TensorVar("w_", "float", 2)), fields=("n", "stride"),
                       process=init + body, methods=tuple(methods))


@pytest.mark.parametrize("seed", range(0, 60, 6))
def test_placed_syncs_on_random_programs_with_methods_slots_and_queues_run_race_free(seed):
    """Six programs per case of the review's generator: the pass (hoisting on) places syncs under which the
    interpreter finds no race for n in 1..3 and both slot strides (before the token fix, 9 of the first 60 raced)."""
    for s in range(seed, seed + 6):
        k, _ = ks.place_syncs(_fuzz_program(s))
        for n in (1, 2, 3):
            for stride in (8, 16):
                r = ki.run(k, {"n": n, "stride": stride},
                           {"x": np.arange(8 * NBLK, dtype=np.float32), "y": np.zeros(8 * NBLK, np.float32)}, 1)
                assert r.ok or "race" not in r.first_fault, (s, n, stride, r.first_fault)


def _call_op(rng, ref):
    """One random access group on `ref(b)` (block b of a tensor): a load, a store, a vector add, a scalar read or
    write, or a round trip through the double-buffered queue q."""
    kind = rng.choice(["in", "out", "add", "tadd", "get", "set", "q"])
    b, c = (int(v) for v in rng.integers(0, 3, 2))
    if kind == "in":
        return (Copy(ref(b), GmView("gmX", Lit(8 * b)), Lit(1), Lit(32)),)
    if kind == "out":
        return (Copy(GmView("gmY", Lit(8 * b)), ref(b), Lit(1), Lit(32)),)
    if kind == "add":
        return (vec(Op.ADDS, dst=ref(b), src0=ref(c), scalar=1.0, count=8),)
    if kind == "tadd":
        return (vec(Op.ADD, dst=Ref("t", Lit(8 * (3 + b))), src0=ref(c), src1=Ref("t", Lit(8 * (3 + c))), count=8),)
    if kind == "get":
        return (GetValue(f"g{next(_NAMES)}", ref(b)),)
    if kind == "set":
        return (SetValue(ref(b), FConst(1.0)),)
    return (Alloc("qt", "q", "float"), Copy(Ref("qt"), GmView("gmX", Lit(8 * b)), Lit(1), Lit(32)),
            EnQue("q", "qt"), DeQue("qt", "q", "float"),
            vec(Op.ADD, dst=ref(c), src0=Ref("qt"), src1=ref(b), count=8), Free("q", "qt"))


def _call_program(seed) -> KernelClass:
    """The review's second generator: methods M0..M2 with a tensor parameter p and an int parameter j (p's blocks
    at offsets of j), M1 / M2 calling lower ones; Process calls them from several sites, in loops (j a function of
    the loop variable), branches and straight code, with other accesses between."""
    rng = np.random.default_rng(seed)
    t = lambda b: Ref("t", Lit(8 * b))   # noqa: E731
    pj = lambda b: Ref("p", Lit(8) * (Sym("j") + Lit(b % 2)))   # noqa: E731
    methods = []
    for m in range(3):
        body: list = []
        for _ in range(int(rng.integers(2, 5))):
            r = rng.random()
            if r < 0.25 and m > 0:
                body.append(Call(f"M{int(rng.integers(0, m))}", (Ref("p", Lit(8 * int(rng.integers(0, 2)))),
                                                                 Lit(int(rng.integers(0, 2))))))
            else:
                body += _call_op(rng, pj if r < 0.5 else t)
        methods.append(Func(f"M{m}", (Param("p", "tensor", "float"), Param("j")), tuple(body)))

    def block(depth, loop_vars, n):
        out: list = []
        for _ in range(n):
            r = rng.random()
            if depth and r < 0.2:
                v = f"i{next(_NAMES)}"
                hi = Lit(int(rng.integers(1, 4))) if rng.random() < 0.5 else Sym("n")
                out.append(For(v, Lit(0), hi, Lit(1), block(depth - 1, loop_vars + [v], 3)))
            elif depth and r < 0.3:
                out.append(If((Constraint(">", Sym("n"), Lit(1)),), block(depth - 1, loop_vars, 2),
                              block(depth - 1, loop_vars, 2)))
            elif r < 0.6:
                j = Bin("%", Sym(loop_vars[-1]), Lit(2)) if loop_vars and rng.random() < 0.4 else \
                    Lit(int(rng.integers(0, 2)))
                out.append(Call(f"M{int(rng.integers(0, 3))}", (Ref("t", Lit(8 * int(rng.integers(0, 3)))), j)))
            else:
                out += _call_op(rng, t)
        return tuple(out)
    init = (InitBuffer("b", Lit(32 * 6)), Get("t", "b", "float"), InitBuffer("q", Lit(32), 2),
            Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32 * 6)))
    return KernelClass("F", "FT", args=("x", "y"), gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")),
                       locals=(Local("b"), Local("q", TPos.VECIN, True, 2)), tensors=(TensorVar("t", "float"),),
                       fields=("n",), process=init + block(2, [], 6), methods=tuple(methods))


class _NoCalls(dict):
    """A call (or states) memo that never keeps an entry: every trial analyses every call and walks every
    statement list from its top."""

    def __setitem__(self, key, value):
        pass

    def setdefault(self, key, default=None):
        return default


@pytest.mark.parametrize("seed", range(0, 60, 20))
def test_trials_reusing_calls_place_exactly_what_trials_analysing_every_call_place(seed, monkeypatch):
    """The prune's and the hoist's trials reuse a method call's output state when its input state, its bindings
    and its loop constants are the same and no changed sync lies in a function it reaches (_Trials): on random
    programs of both review generators (methods with tensor and int parameters called from several sites, in loops
    and branches, nested; syncs placed inside methods and pruned there; hoisted flags), the placements are the same
    as when no call is reused, and the placed programs run race-free on the interpreter. The same for the base
    program's states (_Trials.states: a list walked from the base's state before the first statement a trial
    changes, and left with the base's state after it where the trial's state meets the base's past the last one):
    disabled too, the same placements."""
    for s in range(seed, seed + 16):
        k = _fuzz_program(s) if s % 2 else _call_program(s)
        placed, fast = ks.place_syncs(k)
        if not s % 2:
            for n in (1, 2, 3):
                r = ki.run(placed, {"n": n}, {"x": np.arange(48, dtype=np.float32), "y": np.zeros(48, np.float32)}, 1)
                assert r.ok or "race" not in r.first_fault, (s, n, r.first_fault)
        with monkeypatch.context() as m:
            m.setattr(ks._Trials, "accept", lambda self, prog: None)
            orig = ks._Trials.__init__

            def init(self, kc):
                orig(self, kc)
                self.calls = _NoCalls()
                self.states = _NoCalls()
            m.setattr(ks._Trials, "__init__", init)
            m.setattr(ks._Trials, "start", lambda self, prog, types, used: setattr(self, "base", prog))
            slow = ks.place_syncs(k)[1]
        assert repr(sorted(fast.items(), key=str)) == repr(sorted(slow.items(), key=str)), s


@pytest.mark.parametrize("seed", range(0, 40, 20))
def test_a_trial_s_verdict_is_the_full_analysis_s_on_every_one_sync_deletion(seed):
    """A trial (_clean) applies the syncs from a position map, stops at its first conflict and reuses the calls
    an earlier trial of the same class analysed (_Trials); the full analysis (conflicts) runs the program with the
    syncs as statements, to the end, with no memo. On random programs of both generators, placed, then less each
    placed sync in turn (the trials sharing one memo, as the prune's do): the trial finds a conflict exactly when
    the full analysis does."""
    agree = 0
    for s in range(seed, seed + 20):
        k = _fuzz_program(s) if s % 2 else _call_program(s)
        _, inserted = ks.place_syncs(k, hoist=ks.Hoist.NONE)
        trials = ks._Trials(k)
        trials.start(inserted, {}, ks._used_flags(k))
        for which in ks.placed(inserted):
            drop = set(which)
            trial = {p: [x for j, x in enumerate(v) if (p, j) not in drop] for p, v in inserted.items()}
            full = ks.conflicts(ks.without(k, inserted, which)) == []
            assert ks._clean(k, trial, {}, ks._used_flags(k), trials) == full, (s, which)
            agree += 1
    assert agree > 20


def test_a_trial_does_not_reuse_a_call_analysed_before_a_sync_inside_it_was_removed():
    """Two flag pairs each order ma's V write of block 0 before Process's MTE3 store of it: one inside ma, one in
    Process. nb's needed MTE2 -> V pair is tried first (its trial analyses the call of ma and keeps that call's
    output), ma's pair next (removed: Process's pair covers it), Process's last: it is needed now. Reusing the call
    of ma analysed while ma still held its pair would have removed it too and left a race."""
    def write(block):
        return vec(Op.DUPLICATE, dst=Ref("t", Lit(8 * block)), scalar=1.0, count=8)

    def store(block):
        return Copy(GmView("gmY"), Ref("t", Lit(8 * block)), Lit(1), Lit(32))
    load2 = Copy(Ref("t", Lit(16)), GmView("gmX"), Lit(1), Lit(32))
    read2 = vec(Op.ADDS, dst=Ref("t", Lit(24)), src0=Ref("t", Lit(16)), scalar=1.0, count=8)
    k = _small([Call("ma"), Call("nb"), store(0)],
               [Func("ma", (), (write(0), write(1))), Func("nb", (), (load2, read2))])
    pair = [SetFlag(Pipe.V, Pipe.MTE3, 0), WaitFlag(Pipe.V, Pipe.MTE3, 0)]
    inserted = {("ma", 1): list(pair), ("nb", 1): [SetFlag(Pipe.MTE2, Pipe.V, 0), WaitFlag(Pipe.MTE2, Pipe.V, 0)],
                ("Process", 4): list(pair)}
    assert ks.conflicts(ks._with(k, inserted)) == []
    kept = ks._prune(k, inserted, {}, set(), ks._Trials(k))
    assert sorted(kept) == [("Process", 4), ("nb", 1)], kept
    assert ks.conflicts(ks._with(k, kept)) == [] and not _races(ks._with(k, kept))
    assert _races(ks._with(k, {p: v for p, v in kept.items() if p[0] != "Process"}))


# ------------------------------------------------------------------------------------------------ the memo
def test_the_placement_memo_gives_the_same_program_and_recomputes_a_damaged_entry(tmp_path, monkeypatch):
    """place_syncs_memo: a second placement of the same class reads its entry (place_syncs is not run again) and
    gives the same program; an entry edited by hand (truncated, another key, a statement position that does not
    exist, a SetFlag without its WaitFlag) is not trusted: the class is placed again and the entry rewritten."""
    monkeypatch.setenv("OPGEN_SYNC_DIR", str(tmp_path / "syncs"))
    k0 = ks.strip_syncs(rows_kernel())
    want, ins = ks.place_syncs(k0)
    got, got_ins = ks.place_syncs_memo(k0)
    assert kir.to_text(got) == kir.to_text(want) and got_ins == ins
    gm = {"x": np.ones((13, 37), np.float32), "y": np.zeros((13, 37), np.float32), "s": np.zeros(13, np.float32)}
    r = ki.run(got, dict(rows=13, hidden=37, colAlign=40, rowsPerCore=5, **{"pass": 2}), gm, 3)
    assert r.ok, r.first_fault   # the interpreter's race detector judges the memo's program, not the pass itself
    (entry,) = list((tmp_path / "syncs").glob("*.json"))
    calls = []
    real = ks.place_syncs
    monkeypatch.setattr(ks, "place_syncs", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    assert kir.to_text(ks.place_syncs_memo(k0)[0]) == kir.to_text(want) and calls == []
    text = entry.read_text()
    entry_json = json.loads(text)
    lost = dict(entry_json, inserted=[[p, v[:1]] if v[0][:3] == ["SetFlag", "V", "S"] else [p, v]   # a WaitFlag
                                      for p, v in entry_json["inserted"]])
    # a method the class does not have (methods are stored by number), a doc naming a name it does not have
    no_method = dict(entry_json, inserted=[[[99, *p[1:]] if isinstance(p[0], int) else p, v]
                                           for p, v in entry_json["inserted"]])
    no_name = dict(entry_json, inserted=[[p, [x[:-1] + [[x[-1][0], 99, x[-1][2]]] if isinstance(x[-1], list) else x
                                              for x in v]] for p, v in entry_json["inserted"]])
    assert lost != entry_json and no_method != entry_json and no_name != entry_json
    for bad in (text[: len(text) // 2], text.replace('"key": "', '"key": "0'), json.dumps(no_method),
                json.dumps(no_name), json.dumps(lost)):
        entry.write_text(bad)
        assert kir.to_text(ks.place_syncs_memo(k0)[0]) == kir.to_text(want)
        assert entry.read_text() == text
    assert len(calls) == 5


def test_a_miss_waits_for_the_process_placing_the_same_class(tmp_path, monkeypatch):
    """place_syncs_memo: while another process holds a key's lock (it is placing that class), a miss of the same key
    waits for it and reads the entry it writes instead of placing the class a second time (the suite's two workers
    and a generation's render processes meet the same classes at once)."""
    import fcntl
    import threading

    monkeypatch.setenv("OPGEN_SYNC_DIR", str(tmp_path / "syncs"))
    k0 = ks.strip_syncs(rows_kernel())
    want, ins = ks.place_syncs_memo(k0)
    (entry,) = list((tmp_path / "syncs").glob("*.json"))
    text = entry.read_text()
    entry.unlink()
    calls, got = [], []
    real = ks.place_syncs
    monkeypatch.setattr(ks, "place_syncs", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    with open(entry.with_suffix(".lock"), "a") as lock:   # a lock of its own open file, as another process's
        fcntl.flock(lock, fcntl.LOCK_EX)
        t = threading.Thread(target=lambda: got.append(ks.place_syncs_memo(k0)))
        t.start()
        t.join(0.5)
        assert t.is_alive() and not got and calls == []   # waiting for the lock, not placing
        entry.write_text(text)                            # the other placement's entry
    t.join(60)
    assert calls == [] and len(got) == 1
    assert kir.to_text(got[0][0]) == kir.to_text(want) and got[0][1] == ins


def test_the_memo_tells_classes_apart_by_a_call_s_template_arguments(tmp_path, monkeypatch):
    """Review: two classes that differ only in `Widen<half>` / `Widen<float>` (a template method's type argument,
    which the analysis reads: an fp32 CastFrom ends in its own barrier) got one memo entry, and the half class the
    float class's placement, racy. Each now gets its own; the half one runs race-free. A damaged entry that is JSON
    but no object is recomputed, not an error."""
    monkeypatch.setenv("OPGEN_SYNC_DIR", str(tmp_path / "syncs"))

    def cls(targ):
        widen = Func("Widen", (Param("dst", "tensor", "float"), Param("n")), (
            Get("t", "hb", "S"), vec(Op.DUPLICATE, dst=Ref("t"), scalar=FConst(1.0), count=Sym("n")),
            vec(Op.CAST_FROM, dst=Ref("dst"), src=Ref("t"), count=Sym("n"))), tparams=("S",))
        return KernelClass("K", "KT", args=("y",), gms=(GmTensor("gmY", "float", "y"),),
                           locals=(Local("hb"), Local("b")), tensors=(TensorVar("w", "float"),), methods=(widen,),
                           process=(InitBuffer("hb", Lit(64)), InitBuffer("b", Lit(64)), Get("w", "b", "float"),
                                    Call("Widen", (Ref("w"), Lit(16)), targs=(targ,)),
                                    vec(Op.ADDS, dst=Ref("w"), src0=Ref("w"), scalar=1.0, count=16),
                                    Copy(GmView("gmY"), Ref("w"), Lit(1), Lit(64))))

    ks.place_syncs_memo(cls("float"))
    out, _ = ks.place_syncs_memo(cls("half"))
    assert kir.to_text(out) == kir.to_text(ks.place_syncs(cls("half"))[0])
    r = ki.run(out, {}, {"y": np.zeros(16, np.float32)}, 1)
    assert r.ok, r.first_fault
    for entry in (tmp_path / "syncs").glob("*.json"):
        entry.write_text("[]")
    assert kir.to_text(ks.place_syncs_memo(cls("half"))[0]) == kir.to_text(out)


def _memo_class() -> KernelClass:
    """A class whose placed syncs' docs name a buffer, a GM argument and a struct's GM field, with a comment in two
    bodies, a template method (S) called with the class's template parameter (T), a queue of T and docs."""
    pick = StructDecl("Pick", (("src", "gm", "float", 2),))
    fill = Func("Fill", (Param("p", "struct", "Pick"),), (StructSet("p.src[0]", GmView("gmY")),
                                                           StructSet("p.src[1]", GmView("gmY"), doc="the same")))
    widen = Func("Widen", (Param("out", "tensor", "float"), Param("cnt")), (
        Get("h", "hb", "S"), vec(Op.DUPLICATE, dst=Ref("h"), scalar=FConst(1.0), count=Sym("cnt")),
        vec(Op.CAST_FROM, dst=Ref("out"), src=Ref("h"), count=Sym("cnt"), doc="to fp32")), tparams=("S",),
        doc="cnt ones of S, widened (spec.py:3)")
    process = (
        InitBuffer("b", Lit(256)), InitBuffer("hb", Lit(64)), InitBuffer("inQ", Lit(64), 2),
        Get("t", "b", "float"), StructLet("q", "Pick"), Call("Fill", (Sym("q"),)),
        kir.Comment("load, widen, add"),
        Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(64), doc="x (spec.py:7)"),
        Call("Widen", (Ref("t", Lit(16)), Lit(16)), targs=("T",)),
        For("i", Lit(0), Sym("n"), Lit(1), (
            kir.Comment("one row"),
            vec(Op.ADDS, dst=Ref("t", Lit(16)), src0=Ref("t"), scalar=1.0, count=16),
            Copy(GmView("q.src[0]", Sym("i")), Ref("t", Lit(16)), Lit(1), Lit(64)),
            Copy(Ref("t"), GmView("q.src[1]"), Lit(1), Lit(64)),
            Alloc("u", "inQ", "T"), Copy(Ref("u"), GmView("gmZ"), Lit(1), Lit(32)), EnQue("inQ", "u"),
            DeQue("u", "inQ", "T"), Free("inQ", "u"),
            Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(64)),
            Copy(Ref("t", Lit(32)), GmView("gmY"), Lit(1), Lit(64)),
        ), doc="rows"),
    )
    return KernelClass("MemoDemo", "MemoTiling", args=("x", "y", "z"),
                       gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y"), GmTensor("gmZ", "T", "z")),
                       locals=(Local("b"), Local("hb"), Local("inQ", TPos.VECIN, True, 2)),
                       tensors=(TensorVar("t", "float"),), fields=("n",), structs=(pick,), process=process,
                       methods=(fill, widen), tparams=("T",), doc="a demo (spec.py:1)")


_MEMO_NAMES = {"MemoDemo": "Other", "MemoTiling": "OtherTiling", "x": "xin", "y": "yout", "z": "zin", "gmX": "gX",
               "gmY": "gY", "gmZ": "gZ", "b": "buf", "hb": "halfBuf", "inQ": "queue", "t": "tv", "q": "part",
               "p": "pp", "u": "blk", "i": "row", "n": "count", "cnt": "m", "out": "dstT", "h": "hv",
               "Fill": "Fx", "Widen": "Wx", "S": "Q", "T": "DT"}   # Fx < Init < Process < Wx: the same order
_ROWS_NAMES = {"RowsDemo": "R2", "DemoTiling": "R2Tiling", "x": "a_in", "y": "a_out", "s": "a_sum", "gmX": "gA",
               "gmY": "gB", "gmS": "gC", "inQ": "qa", "outQ": "qb", "redBuf": "rb", "stageBuf": "sb", "red": "rr",
               "redTmp": "rt", "stage": "st", "rows": "nr", "hidden": "nh", "colAlign": "ca", "rowsPerCore": "rpc",
               "pass": "ps", "rowStart": "lo", "rowEnd": "hi", "r0": "first", "k": "cnt", "i": "j", "t": "tin",
               "o": "tout", "sum": "acc", "Compute": "Ca", "CopyIn": "Cb", "CopyOut": "Cc"}


def _renamed(x, names: dict, doc=None):
    """x with every string that is a key of `names` (or whose part before a dot is: a struct field `p.f[N]`)
    replaced, in every field but docs and comment texts; `doc` (when given) gives each doc and comment text its new
    text. Independent of the memo's own tables of which fields hold names."""
    if isinstance(x, str):
        head, dot, rest = x.partition(".")
        return names[x] if x in names else names[head] + dot + rest if dot and head in names else x
    if isinstance(x, tuple):
        return tuple(_renamed(a, names, doc) for a in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        new = {}
        for f in dataclasses.fields(x):
            v = getattr(x, f.name)
            if f.name == "doc" or (isinstance(x, kir.Comment) and f.name == "text"):
                new[f.name] = doc(v) if doc else v
            else:
                new[f.name] = _renamed(v, names, doc)
        return replace(x, **new)
    return x


def _edited(text: str) -> str:
    return f"{text} -- edited (other_spec.py:{len(text)})" if text else ""


def test_the_memo_gives_a_renamed_or_redocumented_class_the_program_a_fresh_placement_gives_it(tmp_path, monkeypatch):
    """The memo key is the class up to docs, comment texts and a one-to-one renaming of its names and template
    parameters: a copy with every name renamed (class, tiling struct, GM arguments and tensors, buffers, tensor
    variables, tiling fields, methods, parameters, loop and struct variables, template parameters and their
    binding), a copy with every doc and comment text edited, and a copy with both read the first class's entry
    (place_syncs is not run, no entry is added), and each prints exactly the C++ a fresh placement of that copy
    prints: the placed syncs' comments name the copy's own buffer, GM argument and struct variable."""
    monkeypatch.setenv("OPGEN_SYNC_DIR", str(tmp_path / "syncs"))
    real, calls = ks.place_syncs, []
    monkeypatch.setattr(ks, "place_syncs", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    printed = {}
    for k, types, names in ((_memo_class(), {"T": "half"}, _MEMO_NAMES),
                            (ks.strip_syncs(rows_kernel()), None, _ROWS_NAMES)):
        ks.place_syncs_memo(k, types)
        entries = sorted((tmp_path / "syncs").glob("*.json"))
        n = len(calls)
        renamed_types = {names.get(t, t): v for t, v in (types or {}).items()}
        for what, copy, ctypes in (("renamed", _renamed(k, names), renamed_types),
                                   ("edited", _renamed(k, {}, _edited), types),
                                   ("both", _renamed(k, names, _edited), renamed_types)):
            assert copy != k and kir.to_cpp(copy) != kir.to_cpp(k)
            got, got_ins = ks.place_syncs_memo(copy, ctypes)
            assert len(calls) == n and sorted((tmp_path / "syncs").glob("*.json")) == entries, (k.name, what)
            want, want_ins = real(copy, ctypes)
            assert kir.to_cpp(got) == kir.to_cpp(want) and got_ins == want_ins, (k.name, what)
            printed[k.name, what] = kir.to_cpp(got)
    cpp = printed["MemoDemo", "both"]
    for line in ("SetFlag<HardEvent::MTE3_MTE2>(evt_2);  // GM field part.src: MTE3 has written it before MTE2 reads it",
                 "// GM yout: MTE3 has written it before MTE2 reads it",
                 "// buf: MTE2 has written it before V reads it",
                 "PipeBarrier<PIPE_V>();  // halfBuf: V has written it before V reads it",
                 "template <typename DT>", "Wx<DT>(tv[16], 16);", "// one row -- edited"):
        assert line in cpp, line
    assert "// qb: V has written it before V reads it" in printed["RowsDemo", "renamed"]


def test_the_memo_key_tells_apart_classes_the_placement_may_tell_apart():
    """What the analysis reads stays in the key: one more statement (a comment too: positions count it), swapped
    operands, another constant, a template parameter bound to another type or not renamed with its binding, a
    template argument that is an element type, two names made one, a renaming that changes the order of the
    functions' names (the prune and the hoist visit positions in that order) each give another key; the renamed
    copy of the test above gives the same."""
    def key(k, types=None):
        return ks._memo_key(k, {"T": "half"} if types is None else types, True, ks.Hoist.ALL)[0]

    k = _memo_class()
    base = key(k)
    assert key(_renamed(k, _MEMO_NAMES), {"DT": "half"}) == base == key(_renamed(k, {}, _edited))
    # a namespace constant's comment may name the spec's inputs (NormRopeConcat's kParts): a renamed spec's class
    # reads the entry; the constant's value stays in the key
    with_const = key(replace(k, consts=(("kParts", 3, "part slots: query, key"),)))
    assert with_const == key(replace(k, consts=(("kParts", 3, "part slots: q2, k2"),))) != base
    assert with_const != key(replace(k, consts=(("kParts", 4, "part slots: query, key"),)))
    loop = k.process[9]
    add = loop.body[1]
    swapped = replace(add, args=(("dst", add.arg("src0")), ("src0", add.arg("dst"))) + add.args[2:])
    widen = k.process[8]
    variants = {
        "one more statement": replace(k, process=k.process + (add,)),
        "one more comment": replace(k, process=k.process[:6] + (kir.Comment("more"),) + k.process[6:]),
        "swapped operands": replace(k, process=k.process[:9] + (replace(loop, body=(loop.body[0], swapped)
                                                                          + loop.body[2:]),)),
        "another constant": replace(k, process=k.process[:9] + (replace(loop, hi=Lit(4)),)),
        "a concrete template argument": replace(k, process=k.process[:8] + (replace(widen, targs=("half",)),)
                                                + k.process[9:]),
        "two buffers made one": _renamed(k, {"hb": "b"}),
        "the functions' order": _renamed(k, {"Fill": "Zz"}),
        "T renamed without its binding": _renamed(k, {"T": "DT"}),
    }
    keys = {what: key(v) for what, v in variants.items()}
    keys["T bound to float"] = key(k, {"T": "float"})
    keys["T unbound"] = key(k, {})
    for what, other in keys.items():
        assert other != base, what
    assert len(set(keys.values())) == len(keys)


# ------------------------------------------------------------------------------------------------ For.apart
def _rows_loop(row, apart: tuple, shared: bool = False) -> KernelClass:
    """Per iteration i of a run-time loop (n iterations): Adds then Muls on block `row(i)` of t (TBuf b); `shared`:
    the row's first instruction adds u (another TBuf) and the iteration ends writing u (a read-after-write across
    iterations that no claim about t covers)."""
    r = Ref("t", row(Sym("i")))
    first = vec(Op.ADD, dst=r, src0=r, src1=Ref("u"), count=8) if shared else \
        vec(Op.ADDS, dst=r, src0=r, scalar=1.0, count=8)
    body = (first, vec(Op.MULS, dst=r, src0=r, scalar=2.0, count=8))
    if shared:
        body += (vec(Op.DUPLICATE, dst=Ref("u"), scalar=3.0, count=8),)
    loop = For("i", Lit(0), Sym("n"), Lit(1), body, apart=apart)
    u0 = vec(Op.DUPLICATE, dst=Ref("u"), scalar=1.0, count=8)
    return replace(_small([InitBuffer("c", Lit(32)), Get("u", "c", "float"), u0, loop]),
                   locals=(Local("b"), Local("c")), tensors=(TensorVar("t", "float"), TensorVar("u", "float")))


def _barriers(k) -> int:
    return sum(isinstance(s, Barrier) for body in [k.process] + [m.body for m in k.methods] for s in kir.walk(body))


@pytest.mark.parametrize("shared", [False, True])
def test_rows_a_loop_keeps_apart_need_no_barrier_across_iterations_and_a_false_claim_races(shared):
    """For.apart: with each iteration on its own block of t (i * 8 floats) and the claim made, the pass orders the
    Adds -> Muls of one row but no row after another row's accesses (without the claim it cannot tell rows i and
    i + 1 apart: a loop-carried barrier); a buffer the claim does not name (u, written every iteration) is still
    ordered across iterations. Each placed program runs race-free and each placed barrier is needed (deleting it
    races). A false claim (every iteration on block 0) leaves the loop-carried dependence unordered, and the
    interpreter's race detector reports it."""
    own = lambda i: Lit(8) * i   # noqa: E731
    plain, _ = ks.place_syncs(_rows_loop(own, (), shared))
    kept, ins = ks.place_syncs(_rows_loop(own, ("t",), shared))
    assert not _races(plain, 3) and not _races(kept, 3)
    assert _barriers(plain) == 2 and _barriers(kept) == (2 if shared else 1), (kir.to_text(plain), kir.to_text(kept))
    for which in ks.placed(ins):
        assert _races(ks.without(_rows_loop(own, ("t",), shared), ins, which), 3), which
    false_claim, _ = ks.place_syncs(_rows_loop(lambda i: Lit(0), ("t",), shared))
    assert _races(false_claim, 3) != shared   # with u the loop-head barrier stays, and orders block 0 too


def test_apart_covers_the_named_tensors_only_and_a_call_in_the_loop_places_its_sync():
    """The review's two programs (For.apart): (1) t and w view one TBuf, t's rows kept apart, w a block every
    iteration writes then reads: the claim says nothing of w, so the loop-carried order of w's accesses stays (the
    buffer another variable views is not marked) and the placed program runs race-free; (2) a method called in the
    loop writes the row of slot 0 of an array kept apart, while the loop reads the TBuf seen whole: the sync
    ordering an earlier iteration's write is placed at the call's path (the marked record keeps its call sites), no
    placement error, race-free."""
    row = Ref("t", Lit(8) * (Sym("i") + Lit(1)))
    alias = For("i", Lit(0), Sym("n"), Lit(1), (
        vec(Op.DUPLICATE, dst=Ref("w"), scalar=2.0, count=8),
        vec(Op.ADD, dst=row, src0=row, src1=Ref("w"), count=8)), apart=("t",))
    k1 = replace(_small([Get("w", "b", "float"), alias]), tensors=(TensorVar("t", "float"), TensorVar("w", "float")))
    placed, _ = ks.place_syncs(k1)
    assert not _races(placed, 3) and _barriers(placed) == 2, kir.to_text(placed)

    wr = vec(Op.DUPLICATE, dst=Ref("r", Lit(8) * Sym("k"), slot=Lit(0)), scalar=2.0, count=8)
    loop = For("i", Lit(0), Sym("n"), Lit(1), (vec(Op.ADDS, dst=Ref("u"), src0=Ref("t"), scalar=1.0, count=8),
                                               Call("M", (Sym("i"),))), apart=("r",))
    k2 = replace(_small([Get("r", "b", "float", slot=Lit(0)), InitBuffer("c", Lit(32)), Get("u", "c", "float"), loop],
                        [Func("M", (Param("k"),), (wr,))]),
                 locals=(Local("b"), Local("c")),
                 tensors=(TensorVar("t", "float"), TensorVar("r", "float", 1), TensorVar("u", "float")))
    placed, _ = ks.place_syncs(k2)
    assert not _races(placed, 3) and not ks.conflicts(placed), kir.to_text(placed)



def _flags(k) -> list:
    return sorted(str(s.event).split(".")[-1] for body in [k.init, k.process] + [m.body for m in k.methods]
                  for s in kir.walk(body) if isinstance(s, SetFlag))


def test_a_loop_claimed_to_run_drops_the_syncs_of_the_path_that_skips_it_and_a_false_claim_faults():
    """For.nonempty on the FlashAttentionScore classes (an item's cube chunks, item * IC < chunks): placed with the
    claims taken away, every class gets its FIX -> M (l0cAcc) and MTE1 -> MTE2 (the key tile in L1) flag pair back
    for the path that would skip the loop, and nothing else changes; the claim is printed. On a small program, the
    interpreter faults when a loop claimed to run runs no iteration, and runs it when it does."""
    classes = kernel_classes(load_spec(str(EXAMPLES / "flash_attention_score.py")))
    assert classes
    for k in classes:
        assert " nonempty {" in kir.to_text(k)
        unclaimed = ks._map_bodies(ks.strip_syncs(k), lambda stmts, pos: [
            (j, replace(x, nonempty=False) if isinstance(x, For) else x) for j, x in enumerate(stmts)])
        again, _ = ks.place_syncs(unclaimed, hoist=ks.Hoist.NONE)
        extra = collections.Counter(_flags(again)) - collections.Counter(_flags(k))
        assert extra == collections.Counter({"FIX_M": 1, "MTE1_MTE2": 1}), extra
        assert not collections.Counter(_flags(k)) - collections.Counter(_flags(again))
    loop = lambda claim: For("i", Lit(0), Sym("n"), Lit(1), (  # noqa: E731
        vec(Op.ADDS, dst=Ref("t", Lit(8)), src0=Ref("t"), scalar=1.0, count=8),), nonempty=claim)
    gm = {"x": np.arange(8 * NBLK, dtype=np.float32), "y": np.zeros(8 * NBLK, np.float32)}
    for n, claim, ok in ((0, True, False), (2, True, True), (0, False, True)):
        placed, _ = ks.place_syncs(_small([Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32)), loop(claim)]))
        r = ki.run(placed, {"n": n}, gm, 1)
        assert r.ok == ok, r.first_fault
        assert ok or "claimed to run at least once" in r.first_fault, r.first_fault


def test_a_method_s_pool_flag_may_share_its_var_name_with_a_pending_flag_of_its_caller():
    """The pass names a pool flag's event_t per function (evt_0, evt_1, ...: a local of that function), so a method
    called while its caller's pair of the same HardEvent is pending may use the same var name: two C++ locals, two
    event ids from the TPipe's pool. The verifier keys a pool flag by its function and var (kir.verify once took
    them for one flag: "flag MTE3_S #0 set again", _call_program(75) hoisted). The placed program verifies, holds
    that situation, and runs race-free on the interpreter."""
    placed, _ = ks.place_syncs(_call_program(75))
    pool = lambda body: {(x.event, x.var) for x in kir.walk(body) if isinstance(x, SetFlag) and x.pool}  # noqa: E731
    assert pool(placed.process) & set().union(*(pool(m.body) for m in placed.methods))
    for n in (1, 2, 3):
        r = ki.run(placed, {"n": n}, {"x": np.arange(48, dtype=np.float32), "y": np.zeros(48, np.float32)}, 1)
        assert r.ok, (n, r.first_fault)


@pytest.mark.parametrize("hoist", [False, True, "loops", None])
def test_hoist_of_the_old_bool_or_string_signature_is_refused(hoist):
    """`hoist` is a kir_sync.Hoist: the old signature's False or "loops" would otherwise read as "hoist every pair"
    (a test written against it placed differently without a word); a TypeError names the parameter."""
    with pytest.raises(TypeError, match=r"hoist must be a kir_sync\.Hoist"):
        ks.place_syncs(_call_program(0), hoist=hoist)


@pytest.mark.parametrize("seed", range(0, 40, 20))
def test_the_pass_s_shortcuts_place_what_it_places_without_them(seed, monkeypatch):
    """The placement's shortcuts (kir_sync module docstring, "What the pass spends"): a copied disjunct sharing its
    queues, tokens and bindings until a statement changes them (_D.own); _placed_outside stopping at the first sync it
    would place inside the loop; the class's tables shared by all its analyses (_class_facts). On random programs of
    both generators, with every shortcut disabled (a deep copy, rounds run to the end, the tables made afresh for
    each analysis) the pass places the same syncs at the same positions, and the placed programs of the method
    generator run race-free on the interpreter."""
    def deep_copy(self):
        d = ks._D.__new__(ks._D)
        d.records, d.queues, d.tokens, d.binds = (self.records.copy(), self.queues.copy(), self.tokens.copy(),
                                                  self.binds.copy())
        d.facts, d.shared = self.facts, False
        return d
    orig_put, orig_facts = ks._Analysis.put, ks._class_facts

    def put(self, pos, sync):
        self.forbid = None
        return orig_put(self, pos, sync)
    for s in range(seed, seed + 20):
        k = _fuzz_program(s) if s % 2 else _call_program(s)
        placed, fast = ks.place_syncs(k)
        if not s % 2:
            for n in (1, 3):
                r = ki.run(placed, {"n": n}, {"x": np.arange(48, dtype=np.float32), "y": np.zeros(48, np.float32)}, 1)
                assert r.ok or "race" not in r.first_fault, (s, n, r.first_fault)
        with monkeypatch.context() as m:
            m.setattr(ks, "_first_put_inside", lambda *a, **kw: False)   # _placed_outside's probe off too
            m.setattr(ks._D, "copy", deep_copy)
            m.setattr(ks._Analysis, "put", put)
            m.setattr(ks, "_class_facts", lambda kc: (ks._FACTS.clear(), orig_facts(kc))[1])
            slow = ks.place_syncs(k)[1]
        assert repr(sorted(fast.items(), key=str)) == repr(sorted(slow.items(), key=str)), s


def test_a_copied_disjunct_changes_apart_from_its_original():
    """_D.copy shares the queues, tokens and bindings until one side changes them (_D.own): a binding, a queue and a
    token set on the copy leave the original's as they were, and the original's later change leaves the copy's."""
    d = ks._D(queues={"q": ((False,), 0, ())}, binds={"x": (("b", "t"), 0, "float")})
    c = d.copy()
    c.own()
    c.binds["y"] = (("b", "u"), 32, "half")
    c.queues["q"] = ((True,), 0, ())
    c.tokens[("flag", "V_MTE3", 0)] = frozenset()
    assert d.binds == {"x": (("b", "t"), 0, "float")} and d.queues == {"q": ((False,), 0, ())} and d.tokens == {}
    d.own()
    d.binds["x"] = (("b", "v"), 0, "float")
    assert c.binds["x"] == (("b", "t"), 0, "float") and set(c.binds) == {"x", "y"}


def _presence_paths_program() -> KernelClass:
    """A class whose presence member has_ (optional input z) guards a queue's protocol (an output block allocated
    under `if has_`: kir.presence_split). Under `if n > 1` (not a presence guard) a V write of block 1 of t
    happens under `if has_`, so after that If one path knows has_ (the write unordered) and one path, the one that
    skipped it, knows nothing; the V read of block 1 under a later `if has_` needs a PipeBarrier<PIPE_V> after the
    write (n = 2, z present)."""
    has = Sym("has_")
    write1 = If((has,), (vec(Op.ADDS, dst=Ref("t", Lit(8)), src0=Ref("t"), scalar=1.0, count=8),), guard=True)
    read1 = If((has,), (vec(Op.ADDS, dst=Ref("t", Lit(16)), src0=Ref("t", Lit(8)), scalar=1.0, count=8),),
               guard=True)
    out = If((has,), (Alloc("qt", "q", "float"), vec(Op.ADDS, dst=Ref("qt"), src0=Ref("t", Lit(16)), scalar=1.0,
                                                     count=8),
                      EnQue("q", "qt"), DeQue("qt", "q", "float"), Copy(GmView("gmY"), Ref("qt"), Lit(1), Lit(32)),
                      Free("q", "qt")), guard=True)
    return KernelClass("PresencePaths", "RvTiling", args=("x", "y", "z"),
                       gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y"),
                            GmTensor("gmZ", "float", "z")),
                       locals=(Local("b"), Local("q", TPos.VECOUT, True, 1)), tensors=(TensorVar("t", "float"),),
                       scalars=(ScalarVar("has_", "bool", False),), presence=(("has_", "z"),), fields=("n",),
                       process=(InitBuffer("b", Lit(32 * NBLK)), Get("t", "b", "float"), InitBuffer("q", Lit(32)),
                                Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32 * NBLK)),
                                If((Constraint(">", Sym("n"), Lit(1)),), (write1,)), read1, out))


def test_paths_of_one_presence_met_at_a_presence_guard_are_joined_not_one_kept():
    """Review (the derived CrossEntropyLossGrad's ROW_SPLIT row-by-row mask Select -> Add missing its
    PipeBarrier<PIPE_V>, with autodiff's mask push): at a presence guard, a path that does not know the member yet
    learns it and then has the key of a path that knew it; the guard's branch must start from the join of both
    (their records), not from the one met last, which dropped the other's unordered write. The pass places the
    barrier the program needs: it runs race-free for every n and presence with y = x[:8] + 3 (x[8:16] + 2 when the
    write is skipped), and without any one placed sync it races on the interpreter."""
    k0 = _presence_paths_program()
    assert kir.presence_split(k0) == ("has_",)
    placed, ins = ks.place_syncs(k0)
    gm = lambda z: {"x": np.arange(8 * NBLK, dtype=np.float32), "y": np.zeros(8, np.float32),  # noqa: E731
                    "z": None if z is None else np.zeros(8, np.float32)}
    for n in (1, 2):
        for z in (None, 1):
            g = gm(z)
            r = ki.run(placed, {"n": n}, g, 1)
            assert r.ok, (n, z, r.first_fault)
            if z is not None:   # y = x[:8] + 3 past the write (n > 1), else x[8:16] + 2 (block 1 as copied in)
                want = np.arange(8, dtype=np.float64) + 3 if n > 1 else np.arange(8, 16, dtype=np.float64) + 2
                np.testing.assert_array_equal(g["y"], want)
    read_at = ("Process", 5, "t", 0)   # the read of block 1 under the second `if has_`
    assert any(isinstance(x, Barrier) and x.pipe is Pipe.V for x in ins.get(read_at, ())), ins
    for w in ks.placed(ins):   # each placed sync is needed: the program less it races for some n with z present
        rs = [ki.run(ks.without(k0, ins, w), {"n": n}, gm(1), 1) for n in (1, 2)]
        assert any(not r.ok and "race" in r.first_fault for r in rs), (w, [r.first_fault for r in rs])


def test_a_sync_anywhere_among_the_syncs_at_its_position_is_not_placed_again():
    """Analysis.put's rule (_holds): the V -> S pair placed for one disjunct, then the MTE2 -> S pair, then the
    V -> S pair again for the next disjunct meeting the same conflict: the list keeps one copy (a second orders
    nothing more: the pair covers every access V issued before the position); a lone SetFlag is no pair, and a
    barrier of another pipe is another sync."""
    k = scale_rows()
    a = ks._Analysis(k, {}, True, {}, set())
    vs = (SetFlag(Pipe.V, Pipe.S, 0), WaitFlag(Pipe.V, Pipe.S, 0))
    ms = (SetFlag(Pipe.MTE2, Pipe.S, 0), WaitFlag(Pipe.MTE2, Pipe.S, 0))
    pos = ("Process", 0)
    a.put(pos, vs)
    a.put(pos, ms)
    a.put(pos, vs)
    a.put(pos, ms)
    assert [type(x).__name__ for x in a.inserted[pos]] == ["SetFlag", "WaitFlag"] * 2 and (a.new, a.dup) == (2, 2)
    assert not ks._holds([vs[0], ms[1]], vs) and not ks._holds([vs[0]], vs)
    a.put(pos, (Barrier(Pipe.V),))
    a.put(pos, (Barrier(Pipe.MTE3),))
    a.put(pos, (Barrier(Pipe.V),))
    assert len(a.inserted[pos]) == 6 and (a.new, a.dup) == (4, 3)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_placement_pauses_the_cyclic_collector_and_restores_it(monkeypatch, enabled):
    """place_syncs runs with the collector off (_collector_paused: its trials' states would be walked by every full
    collection) and leaves it as it found it, on or off."""
    import gc

    seen = []
    real = ks._prune

    def spy(*a, **kw):
        seen.append(gc.isenabled())
        return real(*a, **kw)
    monkeypatch.setattr(ks, "_prune", spy)
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        ks.place_syncs(ks.strip_syncs(scale_rows()))
        assert seen == [False] and gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
