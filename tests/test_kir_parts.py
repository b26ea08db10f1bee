"""Parts of an allocation (kir.Ref.part, docs/design.md "Parts of an allocation"): a lowering that keeps several
values in one buffer at run-time strides (a shared statistic queue: mean at 0, rstd at 4 * groupStride_ /
sizeof(T)) claims each operand inside part j of the buffer cut into n equal parts. The dependency pass orders the
parts apart (no barrier between writes of two parts, where a symbolic offset alone made it place one); the
Kernel-IR interpreter checks the claim (an access past its part faults), so a wrong claim cannot hide a race."""

from __future__ import annotations

import numpy as np
import pytest

from opgen.ir.dims import Lit, Sym
from opgen.kernel import kir
from opgen.kernel import kir_interp as ki
from opgen.kernel import kir_sync as ks
from opgen.kernel.isa import Op, Pipe
from opgen.kernel.kir import (Barrier, Copy, Get, GmTensor, GmView, InitBuffer, KernelClass, Local, Ref, TensorVar,
                              vec)

N = 32   # floats in the buffer: two parts of 16


def _two_parts(parts: bool, whole_read: bool = False) -> KernelClass:
    """x (N floats) copied into t; part 0 (count n from 0) and part 1 (count n from the tiling field `stride`, a
    run-time offset) each get +1 by V; t copied out whole -- or, with whole_read, V reads t whole first."""
    p0 = Ref("t", Lit(0), part=(0, 2) if parts else None)
    p1 = Ref("t", Sym("stride"), part=(1, 2) if parts else None)
    body = [InitBuffer("b", Lit(4 * N)), Get("t", "b", "float"),
            Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(4 * N)),
            vec(Op.ADDS, dst=p0, src0=p0, scalar=1.0, count=Sym("n")),
            vec(Op.ADDS, dst=p1, src0=p1, scalar=1.0, count=Sym("n"))]
    if whole_read:
        body.append(vec(Op.MULS, dst=Ref("t"), src0=Ref("t"), scalar=2.0, count=Lit(N)))
    body.append(Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(4 * N)))
    return KernelClass("Parts", "PartsTiling", args=("x", "y"),
                       gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")), locals=(Local("b"),),
                       tensors=(TensorVar("t", "float"),), fields=("n", "stride"), process=tuple(body))


def _run(k, n=16, stride=16):
    """(the run's result, x, y: the GM output the run wrote in place)."""
    x, y = np.arange(N, dtype=np.float32) / 4, np.zeros(N, np.float32)
    return ki.run(k, {"n": n, "stride": stride}, {"x": x, "y": y}, 1), x, y


def _barriers(k) -> int:
    return sum(isinstance(s, Barrier) for s in kir.walk(k.process))


def test_writes_of_two_parts_need_no_barrier_where_a_runtime_offset_alone_needed_one():
    plain, _ = ks.place_syncs(_two_parts(False))
    parted, _ = ks.place_syncs(_two_parts(True))
    assert _barriers(plain) == 1 and _barriers(parted) == 0
    r, x, y = _run(parted)
    assert r.ok, r.first_fault
    np.testing.assert_array_equal(y, x + np.float32(1))   # each element + 1: exact in fp32 here


def test_every_sync_placed_around_parts_is_needed_and_a_whole_read_still_waits_for_both():
    k0 = _two_parts(True, whole_read=True)
    k, inserted = ks.place_syncs(k0)
    assert _barriers(k) == 1   # the whole-tensor Muls after the parts' Adds: a part overlaps its allocation
    r, x, y = _run(k)
    assert r.ok, r.first_fault
    np.testing.assert_array_equal(y, (x + np.float32(1)) * np.float32(2))
    which = ks.placed(inserted)
    assert which
    for w in which:
        bad, *_ = _run(ks.without(k0, inserted, w))
        assert not bad.ok and "race" in bad.first_fault, w


def test_an_access_past_its_part_is_a_fault_so_a_wrong_claim_cannot_hide_a_race():
    k, _ = ks.place_syncs(_two_parts(True))
    r, *_ = _run(k, n=20, stride=16)    # part 0's Adds reach 4 elements into part 1
    assert not r.ok and "past the end of part 0 of 2" in r.first_fault, r.first_fault
    r, *_ = _run(k, n=8, stride=24)   # part 1's operand from element 24: inside [16, 32), its 8 elements fit
    assert r.ok, r.first_fault
    r, *_ = _run(k, n=8, stride=8)      # part 1's operand starts inside part 0
    assert not r.ok and "lies outside part 1 of 2" in r.first_fault, r.first_fault


@pytest.mark.parametrize("part, rule", [((2, 2), "0 <= j < n"), ((0,), "0 <= j < n"), ((-1, 2), "0 <= j < n")])
def test_the_verifier_refuses_a_malformed_part(part, rule):
    k = _two_parts(True)
    bad = kir.Ref("t", Lit(0), part=part)
    k = KernelClass(k.name, k.tiling_struct, args=k.args, gms=k.gms, locals=k.locals, tensors=k.tensors,
                    fields=k.fields, process=k.process[:2] + (vec(Op.ADDS, dst=bad, src0=bad, scalar=1.0,
                                                                     count=Sym("n")),))
    with pytest.raises(kir.IRError, match=rf"part .* is not \(j, n\) with {rule}"):
        kir.verify(k)


def test_the_shared_statistic_queues_of_the_examples_cast_their_members_without_a_barrier(examples_gen):
    """GroupNorm and InstanceNorm keep mean and rstd (of the data type T) in one queue buffer, rstd at
    4 * groupStride_ / sizeof(T): each member's Cast is part j of the buffer, so no PipeBarrier<PIPE_V> stands
    between the members' casts any more (the kernels run race-free on both engines in test_examples)."""
    for op in ("group_norm", "instance_norm"):
        text = (examples_gen / op / "op_kernel" / f"{op}.h").read_text()
        assert "statOutQue0_" in text, op
        assert not [ln for ln in text.splitlines() if "PipeBarrier" in ln and "statOutQue" in ln], op


# ---- the prune: a flag pair that stands for a barrier becomes the barrier (kir_sync._prune)
def _blk(b: int) -> Ref:
    return Ref("t", Lit(8 * b))


def _second_wait_program() -> tuple:
    """(class, the placement a placing round could leave: a second V -> S wait before a scalar read the first
    already covers, which also orders the V write before it ahead of the V read after it)."""
    body = (InitBuffer("b", Lit(4 * N)), Get("t", "b", "float"), Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(4 * N)),
            vec(Op.ADDS, dst=_blk(1), src0=_blk(0), scalar=1.0, count=8),    # 3: V writes block 1
            kir.GetValue("g0", _blk(1)),                                      # 4: S reads it
            vec(Op.ADDS, dst=_blk(2), src0=_blk(0), scalar=2.0, count=8),    # 5: V writes block 2
            kir.GetValue("g1", _blk(1)),                                      # 6: S reads block 1 again
            vec(Op.ADDS, dst=_blk(3), src0=_blk(2), scalar=3.0, count=8),    # 7: V reads block 2
            Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(4 * N)))
    k = KernelClass("Waits", "WaitsTiling", args=("x", "y"),
                    gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")), locals=(Local("b"),),
                    tensors=(TensorVar("t", "float"),), fields=("n", "stride"), process=body)
    pair = lambda i: [kir.SetFlag(Pipe.V, Pipe.S, i), kir.WaitFlag(Pipe.V, Pipe.S, i)]  # noqa: E731
    inserted = {("Process", 3): [kir.SetFlag(Pipe.MTE2, Pipe.V, 0), kir.WaitFlag(Pipe.MTE2, Pipe.V, 0)],
                ("Process", 4): pair(0), ("Process", 6): pair(1),
                ("Process", 8): [kir.SetFlag(Pipe.V, Pipe.MTE3, 0), kir.WaitFlag(Pipe.V, Pipe.MTE3, 0)]}
    return k, inserted


def test_a_wait_that_only_orders_vector_work_is_pruned_to_a_barrier():
    k, inserted = _second_wait_program()
    assert ks._clean(k, inserted, {}, ks._used_flags(k))   # the placement is sound to start with
    pruned = ks._prune(k, inserted, {}, ks._used_flags(k), ks._Trials(k))
    assert [type(s).__name__ for s in pruned[("Process", 6)]] == ["Barrier"]
    assert pruned[("Process", 6)][0].pipe is Pipe.V
    assert [type(s).__name__ for s in pruned[("Process", 4)]] == ["SetFlag", "WaitFlag"]
    out = ks._with(k, pruned, pooled=True)
    r, x, y = _run(out)
    assert r.ok, r.first_fault
    want = x.copy()
    want[8:16], want[16:24] = x[0:8] + 1, x[0:8] + 2
    want[24:32] = want[16:24] + 3
    np.testing.assert_array_equal(y, want)
    # the barrier is needed: without it the V read of block 2 races with its V write
    bare = ks._with(k, {**pruned, ("Process", 6): []}, pooled=True)
    r, *_ = _run(bare)
    assert not r.ok and "race" in r.first_fault, r.first_fault
