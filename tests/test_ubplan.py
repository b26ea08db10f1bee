"""UB planning by liveness of the attention kernels (opgen/kernel/ubplan.py): which buffers share UB bytes, how the
kernel says it (two TBufPools, the second sharing the first's bytes) and what the tiling charges (the larger pool).

Expected values come from reading the kernels' structure, not from the planner: a buffer whose every use is in the
backward's ZeroTargets / Finish (before the zeroing SyncAll, after the final wait) is never live while the unit loop
runs; the forward's buffers are all used inside the unit loop. UB bytes by hand: the final pass takes POST_ELEMS = 2048
fp32 elements in and 2048 T elements out, 2048 * (4 + 2) = 12288 bytes for half / bfloat16."""

from __future__ import annotations

import re

import pytest

from opgen.kernel import kir
from opgen.kernel.ubplan import POOL_NAMES, plan_ub
from opgen.registry import load_spec
from opgen.tiling.pipeline import kernel_build


@pytest.fixture(scope="module")
def units():
    return {op: kernel_build(load_spec(op)) for op in ("NsaSelectedAttention", "NsaSelectedAttentionGrad")}


def _methods_naming(cls, name: str) -> set:
    """Methods of `cls` whose statements name buffer `name` or a member tensor taken from it (`var = get name`;
    VecMain's InitBuffer / Get lines themselves left out)."""
    texts = {m.name: "\n".join(kir.to_text_stmt(s) for s in m.body) for m in cls.methods}
    names = {name} | {v for t in texts.values() for v in re.findall(rf"(\w+)(?:<[^>]*>)? = get {name}\b", t)}
    out = set()
    for m, text in texts.items():
        body = "\n".join(ln for ln in text.splitlines() if not re.match(r"\s*(init_buffer|\S+ = get )", ln))
        if any(re.search(rf"\b{re.escape(n)}\b", body) for n in names):
            out.add(m)
    return out


def test_the_backward_post_buffers_share_the_unit_loops_bytes(units):
    """NsaSelectedAttentionGrad: the final pass's queues (used by ZeroTargets and Finish only) are pool 1; every
    other UB buffer is pool 0; the emitted class carves them from two TBufPools, the second sharing the first."""
    for c in units["NsaSelectedAttentionGrad"].lowered.extra["aclasses"]:
        cls, plan = c.kclass, c.ubplan
        ub = [b.name for b in cls.locals if b.pos in (kir.TPos.VECIN, kir.TPos.VECOUT, kir.TPos.VECCALC)
              and not b.pool]
        post_only = {b for b in ub if _methods_naming(cls, b) <= {"ZeroTargets", "Finish"}}
        assert post_only == {"postInQue_", "postOutQue_"}
        assert set(plan.pools[1]) == post_only and set(plan.pools[0]) == set(ub) - post_only
        text = kir.to_cpp(cls)
        assert f"pipe_.InitBufPool({POOL_NAMES[1]}, ubPool0Bytes > ubPool1Bytes ? ubPool0Bytes : ubPool1Bytes, " \
               f"{POOL_NAMES[0]});" in text
        for b in ub:
            pool = POOL_NAMES[1] if b in post_only else POOL_NAMES[0]
            assert re.search(rf"{pool}\.InitBuffer\(\s*{b},", text), b
        assert "pipe_.InitBuffer(" not in text.split("VecMain()")[1].split("__aicore__")[0]


def test_the_forward_shares_nothing(units):
    """NsaSelectedAttention: its AIV buffers are all live across the unit loop (the row registers hold a unit's rows
    from the first item to the last): no pools, the class as before."""
    for c in units["NsaSelectedAttention"].lowered.extra["aclasses"]:
        assert not c.ubplan.shares and "TBufPool" not in kir.to_cpp(c.kclass)
        assert "nothing shares UB" in c.ubplan.text()


def test_the_tiling_charges_the_larger_pool(units):
    """The backward's tiling plan marks the two final-pass queues pool 1 and charges UB pool 0's bytes, with pool 1
    (2048 * 4 + 2048 * tBytes bytes, by hand) checked apart: evaluated at a bench shape, vecFixedBytes is 12288
    bytes (bf16) below the plan without sharing (the same counts, opgen.tiling.attention.bwd_program), the rows that
    fit are more, and vecSharedBytes is 12288."""
    from opgen.ir.dtypes import DType
    from opgen.platforms import get_platform
    from opgen.tiling import attention as tattn
    from opgen.tiling.emit import evaluate

    u = units["NsaSelectedAttentionGrad"]
    shared = [b for b in u.tiling.plans[1] if b.pool == 1]
    assert sorted(b.name for b in shared) == ["postInQue", "postOutQue"]
    plain, _ = tattn.bwd_program(u.spec.name, u.counts)
    env = dict(T1=512, T2=512, Bn=2, N1=64, N2=4, D=192, Dv=128, CNT=16, BS=64, MS1=4, MS2=4)
    got = [evaluate(u.spec, prog, u.tiling.inputs, env, {"T": DType.bf16}, get_platform(), {"sparseMode": 2})
           for prog in (plain, u.tiling.program)]
    assert got[0]["vecFixedBytes"] - got[1]["vecFixedBytes"] == 2048 * (4 + 2)
    assert got[1]["vecSharedBytes"] == 2048 * (4 + 2) and "vecSharedBytes" not in got[0]
    assert got[1]["vecRowsFitShared"] > got[0]["vecRowsFit"] and got[1]["fits"] == 1


def _two_pools(body_tail, n=256):
    """A KIR class: pools p0 / p1 sharing their bytes, TBuf a (pool 0) and queue b (pool 1) over the same n fp32
    elements, then `body_tail` (x copied into b, ... y)."""
    from opgen.kernel.kir import (Barrier, Call, Func, Get, GmTensor, InitBuffer, KernelClass, Lit, Local, Ref,
                                  TensorVar, TPos, vec)
    from opgen.kernel.isa import Op, Pipe

    nb = Lit(n * 4)
    body = (InitBuffer("p0_", nb), InitBuffer("p1_", nb, share="p0_"),
            InitBuffer("aBuf_", nb, pool="p0_"), InitBuffer("bQue_", nb, 1, pool="p1_"),
            Get("ta", "aBuf_", "float"),
            vec(Op.DUPLICATE, dst=Ref("ta"), scalar=2.0, count=Lit(n)),
            Barrier(Pipe.ALL)) + tuple(body_tail)
    return KernelClass("PoolDemo", "DemoTiling", args=("x", "y"),
                       gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")),
                       locals=(Local("p0_", TPos.VECCALC, depth=1, pool=True),
                               Local("p1_", TPos.VECCALC, depth=1, pool=True),
                               Local("aBuf_"), Local("bQue_", TPos.VECIN, True)),
                       tensors=(TensorVar("ta", "float"),), fields=(),
                       process=(Call("Main"),), methods=(Func("Main", (), body),), doc="two pools")


@pytest.mark.parametrize("stale", [False, True])
def test_the_kernel_ir_interpreter_faults_on_a_read_of_a_reused_region(stale):
    """The interpreter models TBufPool as the emulation does (tests/test_emu_bufpool.py): b's copy-in writes the
    bytes a had; adding 1 to b gives x + 1 (hand count: y[1] = 1 + 1 = 2); reading a there instead is a fault naming
    the statement and both pools."""
    import numpy as np

    from opgen.kernel import kir_interp as ki
    from opgen.kernel.isa import Op, Pipe
    from opgen.kernel.kir import Alloc, Copy, DeQue, EnQue, Free, GmView, Lit, Ref, SetFlag, WaitFlag, vec

    n = 256
    tail = (Alloc("q", "bQue_", "float"), Copy(Ref("q"), GmView("gmX"), Lit(1), Lit(n * 4)), EnQue("bQue_", "q"),
            DeQue("q", "bQue_", "float"),
            vec(Op.ADDS, dst=Ref("q"), src0=Ref("ta" if stale else "q"), scalar=1.0, count=Lit(n)),
            SetFlag(Pipe.V, Pipe.MTE3), WaitFlag(Pipe.V, Pipe.MTE3),
            Copy(GmView("gmY"), Ref("q"), Lit(1), Lit(n * 4)), Free("bQue_", "q"))
    gm = {"x": np.arange(n, dtype=np.float32), "y": np.zeros(n, np.float32)}
    r = ki.run(_two_pools(tail), {}, gm, 1)
    if stale:
        assert not r.ok and "v.Adds" in r.first_fault, r.first_fault
        assert "reads UB byte 0 through a buffer of TBufPool 1, last written through TBufPool 2" in r.first_fault
    else:
        assert r.ok, r.first_fault
        assert gm["y"][1] == 2.0 and r.ub_peak[0] == n * 4


def test_a_queue_is_live_per_allocation_and_a_tbuf_over_its_loops():
    """The planner on a hand-made class (positions counted by hand, pre-order): queue q is allocated and freed at
    positions 4-6 and 8-10 around TBuf b's only use at 7, so q's lifetimes are those two and b shares q's bytes; in
    a loop (positions 3..8) that uses b and allocates q inside, b is live over the whole loop and nothing shares."""
    from opgen.kernel.kir import (Alloc, Call, Copy, For, Free, Func, Get, GmTensor, GmView, InitBuffer, KernelClass,
                                  Lit, Local, Ref, Sym, TPos)

    use_q = (Alloc("x", "q_", "float"), Copy(GmView("gy"), Ref("x"), Lit(1), Lit(64)), Free("q_", "x"))
    use_b = (Copy(GmView("gy"), Ref("bt"), Lit(1), Lit(64)),)

    def cls(body):
        return KernelClass("K", "TD", args=("y",), gms=(GmTensor("gy", "float", "y"),),
                           locals=(Local("q_", TPos.VECOUT, True), Local("b_")), fields=(),
                           methods=(Func("VecMain", (), body),), process=(Call("VecMain"),))

    head = (InitBuffer("q_", Lit(64), 1), InitBuffer("b_", Lit(64)), Get("bt", "b_", "float"))
    plan = plan_ub(cls(head + use_q + use_b + use_q), "VecMain")
    assert plan.lifetimes == {"q_": [(4, 6), (8, 10)], "b_": [(7, 7)]}
    assert plan.shares and plan.pools == [["q_"], ["b_"]]
    looped = plan_ub(cls(head + (For("i", Lit(0), Sym("n"), Lit(1), use_b + use_q),)), "VecMain")
    assert looped.lifetimes["b_"] == [(4, 8)] and not looped.shares
