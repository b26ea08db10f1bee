"""The Kernel IR interpreter (opgen.kernel.kir_interp): hand-built KIR programs run per core against float64 NumPy
math; every fault rule of the emulation (UB overflow, GM / UB bounds, alignment, poison, queue misuse, flags,
SyncAll deadlock, races between pipes) fires with its message; and (slow) the same programs printed as C++ and run
in the g++ emulation give the same outputs bit for bit and the same race for the same missing sync."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

from opgen.ir.dims import Constraint, Lit
from opgen.kernel import kir
from opgen.kernel import kir_interp as ki
from opgen.kernel import kir_sync as ks
from opgen.kernel.isa import Op, Pipe
from opgen.kernel.kir import (BLOCK_IDX, Alloc, Barrier, Copy, DeQue, E, EnQue, FConst, Free, Get, GetValue, GmTensor,
                              GmView, If, InitBuffer, KernelClass, Local, Ref, SetFlag, SyncAll, TensorVar, TPos,
                              WaitFlag, vec)

from kir_programs import emu_args, renamed, run_emu, scale_rows, softmax_ref, softmax_rows, sync_all_kernel
from test_kir import rows_kernel


def _rows_case(rows, hidden, cores, per, pass_, seed=4):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (rows, hidden)).astype(np.float32)
    gm = {"x": x, "y": np.full((rows, hidden), -7, np.float32), "s": np.full(rows, -7, np.float32)}
    tiling = dict(rows=rows, hidden=hidden, colAlign=-(-hidden // 8) * 8, rowsPerCore=per, **{"pass": pass_})
    return gm, tiling


@pytest.mark.parametrize("rows, hidden, cores, per, pass_", [
    (13, 37, 3, 5, 2),      # cores get 5, 5, 3 rows; passes of 2, 2, 1
    (4, 64, 4, 1, 3),       # one row per core, pass longer than the rows
    (9, 200, 4, 3, 2),      # the last core gets no row at all; rows over three repeats
])
def test_rows_kernel_matches_float64(rows, hidden, cores, per, pass_):
    gm, tiling = _rows_case(rows, hidden, cores, per, pass_)
    r = ki.run(rows_kernel(), tiling, gm, cores)
    assert r.ok, r.first_fault
    x = gm["x"].astype(np.float64)
    want_y = x * 2 + 1
    assert np.array_equal(gm["y"], want_y.astype(np.float32))     # 2x + 1 is exact in fp32 for these inputs
    want_s = want_y.sum(axis=1)
    bound = np.finfo(np.float32).eps * 8 * np.abs(want_y).sum(axis=1)
    assert np.all(np.abs(gm["s"] - want_s) <= bound)
    assert r.ub_peak[0] > 0


def test_a_dropped_barrier_or_flag_is_a_race_naming_both_statements():
    gm, tiling = _rows_case(13, 37, 3, 5, 2)
    r = ki.run(rows_kernel(barrier=False), tiling, gm, 3)
    assert not r.ok
    assert r.first_fault.startswith("[core 0] race (read-after-write) on UB bytes [")
    assert "v.ReduceSum" in r.first_fault and "reads what v.Adds" in r.first_fault
    assert "needs PipeBarrier<PIPE_V> between them" in r.first_fault
    r = ki.run(rows_kernel(flags=False), tiling, gm, 3)
    assert "get_value red[0] (Compute, PIPE_S) reads what v.ReduceSum" in r.first_fault
    assert "needs SetFlag/WaitFlag<HardEvent::V_S>" in r.first_fault


def test_a_launch_frees_its_cores_when_it_returns():
    """The launch state and its cores refer to each other; run breaks the cycle when it returns, clean, faulting or
    raising from a core's set-up, so the cores' UB and GM race shadows are freed at once, not at the collector's
    next full collection (a loop of launches held several: 4.8 GB for 30 PairGuardNorm launches, 1.1 GB once
    freed). Counted with the collector off: every _Core and Shadow alive after run is one nothing frees."""
    import gc

    def alive():
        return sum(type(o) in (ki._Core, ki.Shadow, ki.Arena) for o in gc.get_objects())   # no attribute read

    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        before = alive()
        for barrier in (True, False):   # a clean launch, then one whose first fault stops it
            gm, tiling = _rows_case(13, 37, 3, 5, 2)
            r = ki.run(rows_kernel(barrier=barrier), tiling, gm, 3)
            assert r.ok is barrier, r.first_fault
            assert alive() == before, (barrier, alive(), before)
        with pytest.raises(ki.OpgenError, match="not a scalar member"):   # a core's set-up raising
            ki.run(rows_kernel(), tiling, gm, 3, members={"noSuchMember": 1})
        assert alive() == before, ("set-up", alive(), before)
    finally:
        if was:
            gc.enable()


@pytest.mark.parametrize("dtype, ctype", [(np.float16, "half"), (np.float32, "float")])
def test_softmax_kernel_placed_by_the_pass_matches_float64(dtype, ctype):
    k, _ = ks.place_syncs(softmax_rows(), {"T": ctype})
    rows, cols = 7, 45
    x = np.random.default_rng(1).uniform(-3, 3, (rows, cols)).astype(dtype)
    y = np.zeros((rows, cols), dtype)
    r = ki.run(k, dict(rows=rows, cols=cols, colAlign=48, rowsPerCore=4), {"x": x, "y": y}, 2, types={"T": ctype})
    assert r.ok, r.first_fault
    want = softmax_ref(x)
    tol = 2 ** -10 if ctype == "half" else 1e-6
    assert np.all(np.abs(y.astype(np.float64) - want) <= tol * np.maximum(want, 2 ** -14) + 1e-7)


def test_template_methods_scalar_reads_bool_branches_and_inclusive_loops():
    k, _ = ks.place_syncs(scale_rows())
    x = np.random.default_rng(2).uniform(-2, 2, (5, 20)).astype(np.float32)
    y = np.zeros((5, 20), np.float16)
    r = ki.run(k, dict(rows=5, cols=20, colAlign=24), {"x": x, "y": y}, 1)
    assert r.ok, r.first_fault
    # fp32 steps as the vector unit rounds them (x0 + 1, the product, the exact doubling), then RNE to half
    want = ((x * (x[:, :1] + np.float32(1))) * np.float32(2)).astype(np.float16)
    assert np.array_equal(y.view(np.uint16), want.view(np.uint16))


def test_cores_meet_at_sync_all_and_exchange_through_the_workspace():
    k, _ = ks.place_syncs(sync_all_kernel())
    x = np.random.default_rng(0).uniform(-1, 1, 3 * 40).astype(np.float32)
    s = np.zeros(1, np.float32)
    r = ki.run(k, {"per": 40}, {"x": x, "s": s}, 3, workspace=np.zeros(16, np.float32))
    assert r.ok, r.first_fault
    assert abs(float(s[0]) - x.astype(np.float64).sum()) <= 40 * 3 * np.finfo(np.float32).eps * np.abs(x).sum()


def test_reading_another_cores_workspace_without_sync_all_is_a_race_between_cores():
    """The same exchange without its SyncAll: core 0 reads the partials cores 1 and 2 wrote with nothing ordering the
    two -- a race between cores on the workspace (each core a vector clock, joined at SyncAll), not a wrong sum that
    depends on the order the interpreter ran the cores in. With the SyncAll the neighbouring 4-byte partials of one
    32-B block written by three cores are no conflict (GM writes are byte-exact)."""
    from dataclasses import replace

    k0 = sync_all_kernel()   # without the SyncAll, synchronised inside each core by the dependency pass
    cut, _ = ks.place_syncs(replace(k0, process=tuple(s for s in k0.process if not isinstance(s, SyncAll))))
    x = np.random.default_rng(0).uniform(-1, 1, 3 * 40).astype(np.float32)
    r = ki.run(cut, {"per": 40}, {"x": x, "s": np.zeros(1, np.float32)}, 3, workspace=np.zeros(16, np.float32),
               verify_first=False)
    # the interpreter ran core 0 to its end first: core 1's write meets core 0's unordered read (either order faults)
    assert not r.ok and "race (write-after-read) between cores on GM tensor 'gmW'" in r.first_fault, r.first_fault
    assert "with no SyncAll or cross-core flag ordering them" in r.first_fault


@pytest.mark.parametrize("writer", [0, 1, 2])
def test_a_write_after_other_cores_unordered_reads_is_a_race_whichever_core_writes(writer):
    """After a SyncAll every core reads workspace[0]; then one core overwrites it with nothing ordering the others'
    reads before its write: a write-after-read race between cores, whichever core writes -- also the last one the
    interpreter ran, whose own read came after the others' (review: the kept reader was then itself)."""
    from opgen.kernel.kir import Constraint

    def kernel(w):
        phase1 = (If((Constraint("==", BLOCK_IDX, Lit(0)),), (Copy(Ref("v"), GmView("gmX"), Lit(1), Lit(4)),
                                                                Copy(GmView("gmW"), Ref("v"), Lit(1), Lit(4)))),)
        phase2 = (Copy(Ref("v"), GmView("gmW"), Lit(1), Lit(4)),
                  If((Constraint("==", BLOCK_IDX, Lit(w)),), (Copy(GmView("gmW"), Ref("v"), Lit(1), Lit(4)),)),
                  Copy(GmView("gmS", BLOCK_IDX), Ref("v"), Lit(1), Lit(4)))
        return KernelClass("WarLost", "T", args=("x", "s"), gms=(GmTensor("gmX", "float", "x"),
                           GmTensor("gmS", "float", "s"), GmTensor("gmW", "float", workspace=True)),
                           locals=(Local("vBuf"),), tensors=(TensorVar("v", "float"),), fields=("per",),
                           process=(InitBuffer("vBuf", Lit(256)), Get("v", "vBuf", "float")) + phase1 + (SyncAll(),)
                           + phase2)

    k, _ = ks.place_syncs(kernel(writer))
    r = ki.run(k, {"per": 1}, {"x": np.ones(8, np.float32), "s": np.zeros(8, np.float32)}, 3,
               workspace=np.zeros(16, np.float32), verify_first=False)
    assert not r.ok and "between cores on GM tensor 'gmW'" in r.first_fault, r.first_fault


# ------------------------------------------------------------------------------------------------ fault rules
def _tiny(process, locals_=(Local("b"),), tensors=(TensorVar("t", "float"),)) -> KernelClass:
    return KernelClass("Tiny", "TinyTiling", args=("x", "y"),
                       gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")),
                       locals=locals_, tensors=tensors, fields=("n",), process=tuple(process))


def _run_tiny(k, n=8, cores=1, verify=False, ub=196608):
    gm = {"x": np.arange(16, dtype=np.float32), "y": np.zeros(16, np.float32)}
    return ki.run(k, {"n": n}, gm, cores, ub_bytes=ub, verify_first=verify)


_INIT = (InitBuffer("b", Lit(256)), Get("t", "b", "float"))
_Q = (Local("q", TPos.VECIN, True, 1),)


@pytest.mark.parametrize("process, locals_, message", [
    ((InitBuffer("b", Lit(200000)),), None, r"UB overflow: InitBuffer\(b, num=1, len=200000\) needs 200000 bytes"),
    (_INIT + (Copy(Ref("t"), GmView("gmX", Lit(10)), Lit(1), Lit(32)),), None,
     r"GM out of range on tensor 'gmX': bytes \[40, 72\) of 64"),
    (_INIT + (Copy(Ref("t", Lit(56)), GmView("gmX"), Lit(1), Lit(64)),), None,
     r"UB span of 64 bytes exceeds the 32-byte local tensor"),
    (_INIT + (vec(Op.DUPLICATE, dst=Ref("t", Lit(3)), scalar=1.0, count=E("n")),), None,
     r"Duplicate: UB address 12 is not 32-byte aligned"),
    (_INIT + (Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(32)),), None,
     r"copies unwritten \(poisoned\) UB byte at address 0 to GM tensor 'gmY'"),
    (_INIT + (GetValue("v", Ref("t", Lit(2))),), None, r"GetValue: read of unwritten \(poisoned\) UB"),
    (_INIT + (Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(6)),), None, r"blockLen 6 bytes is not a multiple"),
    ((WaitFlag(Pipe.MTE2, Pipe.V),), None, r"WaitFlag<HardEvent::MTE2_V>\(0\) in Process has no earlier SetFlag"),
    ((SetFlag(Pipe.V, Pipe.S, 3), SetFlag(Pipe.V, Pipe.S, 3)), None, r"the flag is still set"),
    ((SetFlag(Pipe.V, Pipe.MTE3, 4),), None, r"SetFlag<HardEvent::V_MTE3>\(4\) is never consumed"),
    ((InitBuffer("q", Lit(64), 1), DeQue("t", "q", "float")), _Q, r"DeQue on an empty queue q"),
    ((InitBuffer("q", Lit(64), 1), Alloc("t", "q", "float"), Alloc("t", "q", "float")), _Q,
     r"all 1 buffers of q are in use"),
    ((InitBuffer("q", Lit(64), 1), Alloc("t", "q", "float"), Free("q", "t"), Free("q", "t")), _Q,
     r"FreeTensor of a buffer that is not allocated \(double free\)"),
    ((InitBuffer("q", Lit(64), 2), Alloc("t", "q", "float"), EnQue("q", "t"), Alloc("t", "q", "float"),
      EnQue("q", "t")), _Q, r"more than depth=1 tensors enqueued"),
])
def test_every_fault_rule_fires_with_its_message(process, locals_, message):
    k = _tiny(process, locals_ or (Local("b"),))
    r = _run_tiny(k)
    assert not r.ok and re.search(message, r.first_fault), r.first_fault
    assert r.first_fault.startswith("[core 0] ")


def test_the_platform_ub_size_bounds_the_arena():
    k = _tiny((InitBuffer("b", Lit(100000)),))
    assert _run_tiny(k, ub=196608).ok
    assert "UB overflow" in _run_tiny(k, ub=65536).first_fault


def test_a_sync_all_some_core_never_reaches_is_a_deadlock():
    k = _tiny((If((Constraint("==", BLOCK_IDX, Lit(0)),), (SyncAll(),)),))
    r = _run_tiny(k, cores=3)
    assert "SyncAll deadlock" in r.first_fault and "[1, 2]" in r.first_fault


def test_a_race_through_a_queue_needs_no_flag_but_a_tbuf_does():
    # MTE2 writes, V reads: through a VECIN queue the EnQue / DeQue hand-off orders them; through a TBuf nothing.
    q = (InitBuffer("q", Lit(64), 1), Alloc("t", "q", "float"), Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32)),
         EnQue("q", "t"), DeQue("t", "q", "float"), vec(Op.ADDS, dst="t", src0="t", scalar=1.0, count=E("n")),
         Free("q", "t"))
    assert _run_tiny(_tiny(q, _Q), verify=True).ok
    b = _INIT + (Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32)), vec(Op.ADDS, dst="t", src0="t", scalar=1.0,
                                                                    count=E("n")))
    r = _run_tiny(_tiny(b))
    assert "race (read-after-write)" in r.first_fault and "MTE2_V" in r.first_fault
    ok = _INIT + (Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32)), SetFlag(Pipe.MTE2, Pipe.V),
                  WaitFlag(Pipe.MTE2, Pipe.V), vec(Op.ADDS, dst="t", src0="t", scalar=FConst(1.0), count=E("n")))
    assert _run_tiny(_tiny(ok)).ok


def test_the_event_id_pool_as_the_emulation_models_it():
    """The TPipe's event-id pool (EMU.md "Event ids"; the emulation's pool_* scenarios in tests/cpp/emu_races.cpp):
    a VECIN queue's EnQue holds MTE2_V id 0 until its DeQue, so a fixed SetFlag<MTE2_V>(0) between them faults
    naming the queue, and a fixed SetFlag still set when the queue takes id 0 faults naming the SetFlag; a
    fetched pair (id 1) and an allocated pair around work run; the verifier refuses a fetch pair with a statement
    between set and wait, and a pool wait whose var no set of its list declares."""
    head = (InitBuffer("q", Lit(64), 1), Alloc("t", "q", "float"), Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32)))
    tail = (DeQue("t", "q", "float"), Free("q", "t"))
    fixed = (SetFlag(Pipe.MTE2, Pipe.V, 0), WaitFlag(Pipe.MTE2, Pipe.V, 0))
    r = _run_tiny(_tiny(head + (EnQue("q", "t"),) + fixed + tail, _Q))
    assert not r.ok and re.search(r"SetFlag<HardEvent::MTE2_V>\(0\) in Process: TQue q::EnQue holds event id 0",
                                  r.first_fault), r.first_fault
    r = _run_tiny(_tiny(head + fixed[:1] + (EnQue("q", "t"),) + fixed[1:] + tail, _Q))
    assert not r.ok and "TQue q::EnQue in Process takes HardEvent::MTE2_V id 0" in r.first_fault, r.first_fault
    var = kir.EVENT_VAR_PREFIX + "0"
    fetch = (SetFlag(Pipe.MTE2, Pipe.V, 0, pool="fetch", var=var), WaitFlag(Pipe.MTE2, Pipe.V, 0, pool="fetch", var=var))
    assert _run_tiny(_tiny(head + (EnQue("q", "t"),) + fetch + tail, _Q), verify=True).ok
    alloc = (SetFlag(Pipe.MTE2, Pipe.V, 0, pool="alloc", var=var), EnQue("q", "t"),
             WaitFlag(Pipe.MTE2, Pipe.V, 0, pool="alloc", var=var))
    assert _run_tiny(_tiny(head + alloc + tail, _Q), verify=True).ok
    with pytest.raises(kir.IRError, match="must follow it at once"):
        kir.verify(_tiny(head + fetch[:1] + (EnQue("q", "t"),) + fetch[1:] + tail, _Q))
    with pytest.raises(kir.IRError, match="without a SetFlag of that var"):
        kir.verify(_tiny(head + (EnQue("q", "t"), fetch[1]) + tail, _Q))
    with pytest.raises(kir.IRError, match="reserved for the printer's event ids"):
        kir.check_name(var, "scalar")


POOL_EXHAUSTED = ("TQue::FreeTensor: all 8 ids of HardEvent::V_MTE2 are held (queues: mask 255, AllocEventID: mask 0): "
                  "the device's pool has no id to give (a release build hands out one past EVENT_ID7; "
                  "docs/reference/ascendc.md §1.5)")
"""The fault both engines give a queue hand-off that finds the TPipe's 8 ids of its HardEvent held (the emulation's
text in tests/test_emu_pipes.py test_a_ninth_freed_buffer_exhausts_the_pool, written out there too)."""


def _nine_freed_buffers() -> KernelClass:
    """Three VECIN queues of three buffers each: every buffer allocated, filled, handed to V and freed, none
    allocated again, so each FreeTensor holds a V_MTE2 id until the kernel ends; the ninth finds none free."""
    qs = ("qa", "qb", "qc")
    body: list = [InitBuffer(q, Lit(64), 3) for q in qs]
    for q in qs:
        for j in range(3):
            body += [Alloc(f"t{j}", q, "float"), Copy(Ref(f"t{j}"), GmView("gmX"), Lit(1), Lit(32))]
        for j in range(3):
            body += [EnQue(q, f"t{j}"), DeQue(f"t{j}", q, "float")]
        body += [Free(q, f"t{j}") for j in range(3)]
    return _tiny(body, tuple(Local(q, TPos.VECIN, True, 1) for q in qs),
                 tuple(TensorVar(f"t{j}", "float") for j in range(3)))


def test_a_ninth_freed_buffer_exhausts_the_pool():
    """A queue's FreeTensor takes an id of its hand-off's HardEvent (V_MTE2 for VECIN) from the TPipe's pool of 8
    until the buffer's next AllocTensor (docs/reference/ascendc.md §1.5): nine buffers freed and not allocated
    again leave the ninth none. The device's AllocEventID checks that by a debug assertion only, so the interpreter
    faults (never more permissive than the device), with the emulation's text; the static count refuses the class
    before it runs (kir.check_event_ids: the queues' buffers of one event past the pool), as a rule of kir.verify."""
    r = _run_tiny(_nine_freed_buffers())
    assert not r.ok and r.first_fault.endswith(POOL_EXHAUSTED), r.first_fault
    with pytest.raises(kir.IRError, match=r"queues hold up to 9 ids of HardEvent::V_MTE2 at once \(qa \(3\), "
                                          r"qb \(3\), qc \(3\)\), more than the TPipe's pool of 8"):
        kir.check_event_ids(_nine_freed_buffers())
    with pytest.raises(kir.IRError, match=r"class \w+: its queues hold up to 9 ids of HardEvent::V_MTE2"):
        kir.verify(_nine_freed_buffers())   # a rule of the verifier: such a class is never printed or run
    with pytest.raises(kir.IRError, match=r"9 ids of HardEvent::V_MTE2"):
        kir.to_cpp(_nine_freed_buffers())   # every emitted class is verified first: none past the pool is printed
    assert kir.queue_event_buffers(_nine_freed_buffers())["MTE2_V"][0] == 3   # one enqueued buffer a queue (depth 1)


# ------------------------------------------------------------------------------------------------ exact WAR, GM hazards
def _flags(src, dst):
    return (SetFlag(src, dst), WaitFlag(src, dst))


def _inplace(barrier: bool):
    """Mul reads t[0:16], then an in-place Adds reads and writes it: its own read is no race with its write, but
    Mul's read before it is one unless a PipeBarrier<PIPE_V> separates them (docs/reference/ascendc.md §1.6)."""
    return (InitBuffer("b", Lit(256)), Get("t", "b", "float"),
            vec(Op.DUPLICATE, dst=Ref("t"), scalar=1.0, count=E("n")),
            vec(Op.DUPLICATE, dst=Ref("t", Lit(16)), scalar=2.0, count=E("n")),
            Barrier(Pipe.V),
            vec(Op.MUL, dst=Ref("t", Lit(32)), src0=Ref("t"), src1=Ref("t", Lit(16)), count=E("n")),
            *((Barrier(Pipe.V),) if barrier else ()),
            vec(Op.ADDS, dst=Ref("t"), src0=Ref("t"), scalar=1.0, count=E("n")))


def _gm_raw(sync: str):
    """t stored to gmY by MTE3, then loaded back by MTE2: the load needs MTE3_MTE2 or a PIPE_ALL barrier (sync:
    "flag", "all", "" or "disjoint": the load reads the other 32-B block of gmY)."""
    load_at = Lit(8) if sync == "disjoint" else Lit(0)
    return (InitBuffer("b", Lit(256)), Get("t", "b", "float"),
            vec(Op.DUPLICATE, dst=Ref("t"), scalar=3.0, count=E("n")), *_flags(Pipe.V, Pipe.MTE3),
            Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(32)),
            *(_flags(Pipe.MTE3, Pipe.MTE2) if sync == "flag" else (Barrier(Pipe.ALL),) if sync == "all" else ()),
            Copy(Ref("t", Lit(32)), GmView("gmY", load_at), Lit(1), Lit(32)))


def _gm_war(chain: bool):
    """t loaded from gmX by MTE2, then gmX overwritten by MTE3 from u: the store must wait for the load (MTE2_MTE3);
    when u is computed from t, MTE2_V and V_MTE3 order them already (transitively)."""
    return (InitBuffer("b", Lit(256)), Get("t", "b", "float"),
            Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32)),
            *(_flags(Pipe.MTE2, Pipe.V) if chain else ()),
            (vec(Op.MULS, dst=Ref("t", Lit(32)), src0=Ref("t"), scalar=2.0, count=E("n")) if chain else
             vec(Op.DUPLICATE, dst=Ref("t", Lit(32)), scalar=2.0, count=E("n"))),
            *_flags(Pipe.V, Pipe.MTE3),
            Copy(GmView("gmX"), Ref("t", Lit(32)), Lit(1), Lit(32)))


# name: (statements, expected first fault or None); n = 8 floats (one 32-B block)
SHADOW_CASES = {
    "InplaceWar": (_inplace(False), r"race \(write-after-read\) on UB bytes \[0, 32\): v\.Adds.* writes what "
                   r"v\.Mul.* read with nothing ordering them: needs PipeBarrier<PIPE_V> between them"),
    "InplaceBarrier": (_inplace(True), None),
    "GmRaw": (_gm_raw(""), r"race \(read-after-write\) on GM tensor 'gmY' bytes \[0, 32\): .*PIPE_MTE2\) reads "
              r"what .*PIPE_MTE3\) wrote with nothing ordering them: needs SetFlag/WaitFlag<HardEvent::MTE3_MTE2>"),
    "GmRawFlag": (_gm_raw("flag"), None),
    "GmRawAll": (_gm_raw("all"), None),
    "GmDisjoint": (_gm_raw("disjoint"), None),
    "GmWar": (_gm_war(False), r"race \(write-after-read\) on GM tensor 'gmX' bytes \[0, 32\): .*PIPE_MTE3\) "
              r"writes what .*PIPE_MTE2\) read with nothing ordering them: needs "
              r"SetFlag/WaitFlag<HardEvent::MTE2_MTE3>"),
    "GmWarChain": (_gm_war(True), None),
}


@pytest.mark.parametrize("name", sorted(SHADOW_CASES))
def test_war_after_an_in_place_read_and_gm_hazards_inside_a_core(name):
    stmts, want = SHADOW_CASES[name]
    gm = {"x": np.arange(16, dtype=np.float32), "y": np.zeros(16, np.float32)}
    r = ki.run(_tiny(stmts), {"n": 8}, gm, 1, verify_first=False)
    if want is None:
        assert r.ok, r.first_fault
        if name in ("GmRawFlag", "GmRawAll"):
            assert np.array_equal(gm["y"][:8], np.full(8, 3, np.float32))
        if name == "GmWarChain":
            assert np.array_equal(gm["x"][:8], 2.0 * np.arange(8, dtype=np.float32))
    else:
        assert not r.ok and re.search(want, r.first_fault), r.first_fault


def test_gm_hazards_are_per_core():
    """Core 1 loads the gmY block core 0 stored, with SyncAll between: ordered (the in-core barrier of SyncAll);
    other cores' accesses are not in a core's GM shadow."""
    stmts = (InitBuffer("b", Lit(256)), Get("t", "b", "float"),
             If((Constraint("==", BLOCK_IDX, Lit(0)),), (
                 vec(Op.DUPLICATE, dst=Ref("t"), scalar=3.0, count=E("n")), *_flags(Pipe.V, Pipe.MTE3),
                 Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(32)))),
             SyncAll(),
             Copy(Ref("t", Lit(32)), GmView("gmY"), Lit(1), Lit(32)))
    gm = {"x": np.arange(16, dtype=np.float32), "y": np.zeros(16, np.float32)}
    r = ki.run(_tiny(stmts), {"n": 8}, gm, 2, verify_first=False)
    assert r.ok, r.first_fault


# ------------------------------------------------------------------------------------------------ the g++ emulation
_RACE = re.compile(r"^\[core (\d+)\] race \(([a-z-]+)\) on (UB|GM)(?: tensor '\w+')? bytes \[(\d+), (\d+)\): "
                   r".* needs (.*) between them")


def _race_key(msg: str):
    m = _RACE.match(msg)
    assert m, msg
    return m.groups()


@pytest.mark.slow
def test_the_interpreter_and_the_gpp_emulation_agree_bit_for_bit_and_fault_for_fault(tmp_path, emu_instances,
                                                                                      emu_pch):
    if shutil.which("g++") is None:
        pytest.skip("g++ not available")
    extra = emu_args(emu_instances, emu_pch)
    rows, cols, cores = 7, 45, 2
    sm, ins = ks.place_syncs(softmax_rows(), {"T": "half"})
    mutants = [renamed(ks.without(softmax_rows(), ins, w), f"SmMut{i}") for i, w in enumerate(ks.placed(ins))]
    x = np.random.default_rng(1).uniform(-3, 3, (rows, cols)).astype(np.float16)
    gm = {"x": x, "y": np.zeros((rows, cols), np.float16)}
    tiling = dict(rows=rows, cols=cols, colAlign=48, rowsPerCore=4)
    classes = [sm] + mutants
    emu = run_emu(tmp_path, classes, "SmTiling", ["rows", "cols", "colAlign", "rowsPerCore"], tiling, gm, cores,
                  {"T": "half"}, extra)
    for k in classes:
        g = {n: a.copy() for n, a in gm.items()}
        r = ki.run(k, tiling, g, cores, types={"T": "half"})
        ok, fault, outs = emu[k.name]
        assert r.ok == ok, (k.name, r.first_fault, fault)
        if ok:
            assert np.array_equal(g["y"].view(np.uint16), outs["y"].view(np.uint16)), k.name
        else:
            assert _race_key(r.first_fault) == _race_key(fault), (r.first_fault, fault)

    # a template method with a scalar read in its operand (FLoad), a bool branch, a round-mode parameter, an
    # inclusive loop; its mutants
    sc, ins = ks.place_syncs(scale_rows())
    classes = [sc] + [renamed(ks.without(scale_rows(), ins, w), f"ScMut{i}") for i, w in enumerate(ks.placed(ins))]
    x = np.random.default_rng(2).uniform(-2, 2, (5, 20)).astype(np.float32)
    gm = {"x": x, "y": np.zeros((5, 20), np.float16)}
    tiling = dict(rows=5, cols=20, colAlign=24)
    emu = run_emu(tmp_path, classes, "ScTiling", ["rows", "cols", "colAlign"], tiling, gm, 1, {}, extra)
    for k in classes:
        g = {n: a.copy() for n, a in gm.items()}
        r = ki.run(k, tiling, g, 1)
        ok, fault, outs = emu[k.name]
        assert r.ok == ok, (k.name, r.first_fault, fault)
        if ok:
            assert np.array_equal(g["y"].view(np.uint16), outs["y"].view(np.uint16)), k.name
        else:
            assert _race_key(r.first_fault) == _race_key(fault), (r.first_fault, fault)

    # the rows kernel (queues, a member loop, scalar staging), its two dropped syncs, float I/O
    gm, tiling = _rows_case(13, 37, 3, 5, 2)
    classes = [rows_kernel("RowsGood"), rows_kernel("RowsNoBarrier", barrier=False),
               rows_kernel("RowsNoFlag", flags=False)]
    emu = run_emu(tmp_path, classes, "DemoTiling", ["rows", "hidden", "colAlign", "rowsPerCore", "pass"], tiling,
                  gm, 3, {}, extra)
    for k in classes:
        g = {n: a.copy() for n, a in gm.items()}
        r = ki.run(k, tiling, g, 3)
        ok, fault, outs = emu[k.name]
        assert r.ok == ok, (k.name, r.first_fault, fault)
        if ok:
            for n in ("y", "s"):
                assert np.array_equal(g[n].view(np.uint32), outs[n].view(np.uint32)), (k.name, n)
        else:
            assert _race_key(r.first_fault) == _race_key(fault), (r.first_fault, fault)


def test_a_kernel_with_a_template_parameter_needs_its_type():
    with pytest.raises(Exception, match="template parameter T needs an element type"):
        ki.run(softmax_rows(), dict(rows=1, cols=8, colAlign=16, rowsPerCore=1),
               {"x": np.zeros(8, np.float16), "y": np.zeros(8, np.float16)}, 1)
    with pytest.raises(Exception, match="block_dim must be a positive integer"):
        ki.run(rows_kernel(), {}, {}, 0)
    with pytest.raises(Exception, match="tiling field cols not given"):
        ki.run(replace(softmax_rows()), dict(rows=1), {}, 1, types={"T": "half"})


@pytest.mark.slow
def test_the_gpp_emulation_agrees_on_in_place_war_and_gm_hazards(tmp_path, emu_instances, emu_pch):
    """SHADOW_CASES printed as C++ and run in the g++ emulation: the same race (kind, memory, block, needed sync)
    or the same pass, and the same GM outputs."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not available")
    classes = [replace(_tiny(stmts), name=f"Sh{name}") for name, (stmts, _) in SHADOW_CASES.items()]
    gm = {"x": np.arange(16, dtype=np.float32), "y": np.zeros(16, np.float32)}
    emu = run_emu(tmp_path, classes, "TinyTiling", ["n"], {"n": 8}, gm, 1, {}, emu_args(emu_instances, emu_pch))
    for k in classes:
        g = {n: a.copy() for n, a in gm.items()}
        r = ki.run(k, {"n": 8}, g, 1, verify_first=False)
        ok, fault, outs = emu[k.name]
        assert r.ok == ok, (k.name, r.first_fault, fault)
        if ok:
            for n in ("x", "y"):
                assert np.array_equal(g[n], outs[n]), (k.name, n)
        else:
            assert _race_key(r.first_fault) == _race_key(fault), (r.first_fault, fault)


def test_gm_shadow_pages_keep_byte_addresses_across_a_page_boundary():
    """A store spanning two of the interpreter's GM shadow pages (ki._GM_PAGE bytes) and a reload of its second
    block: the race names the GM bytes of that block (page origin added), not page-relative ones."""
    at = ki._GM_PAGE // 4 - 8        # element where the store starts: 32 B before the page boundary
    stmts = (InitBuffer("b", Lit(256)), Get("t", "b", "float"),
             vec(Op.DUPLICATE, dst=Ref("t"), scalar=3.0, count=E("n")), *_flags(Pipe.V, Pipe.MTE3),
             Copy(GmView("gmY", Lit(at)), Ref("t"), Lit(1), Lit(64)),
             Copy(Ref("t", Lit(32)), GmView("gmY", Lit(at + 8)), Lit(1), Lit(32)))
    gm = {"x": np.zeros(16, np.float32), "y": np.zeros(2 * ki._GM_PAGE // 4, np.float32)}
    r = ki.run(_tiny(stmts), {"n": 16}, gm, 1, verify_first=False)
    page = ki._GM_PAGE
    assert f"race (read-after-write) on GM tensor 'gmY' bytes [{page}, {page + 32})" in r.first_fault, r.first_fault


# ------------------------------------------------------------------------------------------------ compare / select
def _threshold_kernel(fill: bool) -> KernelClass:
    """y[:n] = x[:n] where x > 0 else 0.0 (n < 128, one row): copy in, Compares GT into a bit mask kept in the
    bytes of a second fp32 buffer (Ref.as_dtype), Select's scalar form, copy out; counts rounded up to 64 lanes
    (whole 256-B repeats). With `fill`, both buffers are zeroed first, so the lanes past n are written."""
    n64 = E("n64")
    body = [InitBuffer("b", Lit(128 * 4)), InitBuffer("m", Lit(128 * 4)), Get("t", "b", "float"),
            Get("k", "m", "float")]
    if fill:
        body += [vec(Op.DUPLICATE, dst="t", scalar=0.0, count=Lit(128)),
                 vec(Op.DUPLICATE, dst="k", scalar=0.0, count=Lit(128)), Barrier(Pipe.V),
                 SetFlag(Pipe.V, Pipe.MTE2), WaitFlag(Pipe.V, Pipe.MTE2)]
    body += [Copy(Ref("t"), GmView("gmX"), Lit(1), E("n") * 4, pad_value=None),
             SetFlag(Pipe.MTE2, Pipe.V), WaitFlag(Pipe.MTE2, Pipe.V),
             vec(Op.COMPARE_SCALAR, dst=Ref("k", as_dtype="uint8_t"), src0="t", scalar=0.0, mode="GT", count=n64),
             Barrier(Pipe.V),
             vec(Op.SELECT_SCALAR, dst="t", mask=Ref("k", as_dtype="uint8_t"), src0="t", scalar=0.0, count=n64),
             SetFlag(Pipe.V, Pipe.MTE3), WaitFlag(Pipe.V, Pipe.MTE3),
             Copy(GmView("gmY"), Ref("t"), Lit(1), E("n") * 4)]
    return KernelClass("Thr", "ThrTiling", args=("x", "y"),
                       gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")),
                       locals=(Local("b"), Local("m")), tensors=(TensorVar("t", "float"), TensorVar("k", "float")),
                       fields=("n", "n64"), process=tuple(body))


@pytest.mark.parametrize("n", [1, 64, 77])
def test_compare_and_select_through_a_reinterpreted_mask_match_float64(n):
    """The bit mask of Compares read by Select (rows family's compare / select, opgen.kernel.rowprog
    MASK_KINDS) gives float64's where(x > 0, x, 0) on every lane up to n, NaN and -0.0 included."""
    x = np.random.default_rng(n).uniform(-2, 2, 128).astype(np.float32)
    x[:3] = [np.nan, -0.0, 0.0][:3]
    y = np.full(128, -7, np.float32)
    r = ki.run(_threshold_kernel(True), {"n": n, "n64": -(-n // 64) * 64}, {"x": x, "y": y}, 1)
    assert r.ok, r.first_fault
    x64 = x[:n].astype(np.float64)
    np.testing.assert_array_equal(y[:n], np.where(x64 > 0, x64, 0.0))
    assert np.all(y[n:] == -7)


def test_select_over_mask_bytes_of_unwritten_lanes_is_poison():
    """Without the zero fill, the mask byte of lanes 72..79 covers unwritten lanes 77..79 (n = 77): the byte is
    unwritten, so are the selected lanes 72..76, and copying them out faults — what the rows family's one-time
    zero fill of its row temporaries prevents (opgen.kernel.rowsched)."""
    x = np.ones(128, np.float32)
    r = ki.run(_threshold_kernel(False), {"n": 77, "n64": 128}, {"x": x, "y": np.zeros(128, np.float32)}, 1)
    assert not r.ok and "unwritten (poisoned)" in r.first_fault, r.first_fault


def test_trap_unless_stops_the_core_outside_its_bound():
    """TrapUnless, the rows family's index check (docs/reference/ascendc.md §1.9, Trap): the core stops when the
    index read from UB lies outside [0, bound) and runs on at the boundary inside it; the C++ form calls Trap()."""
    from opgen.kernel.kir import CppPrinter, FRef, TrapUnless

    body = _INIT + (Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(32)), SetFlag(Pipe.MTE2, Pipe.S),
                    WaitFlag(Pipe.MTE2, Pipe.S), GetValue("v", Ref("t", Lit(5))), TrapUnless(FRef("v"), E("n")))
    k = _tiny(body, (Local("b"),))
    assert _run_tiny(k, n=6).ok                          # x[5] = 5 < 6
    r = _run_tiny(k, n=5)
    assert not r.ok and "Trap()" in r.first_fault and "index 5 outside [0, 5)" in r.first_fault, r.first_fault
    text = "\n".join(CppPrinter(k).body((body[-1],), 1, {}))
    assert "if (!(v >= 0.0f && v < static_cast<float>(td_->n))) {" in text and "Trap();" in text, text


def _rep(op, dst, srcs, mask, repeat, params=None, **vals):
    """A mask / repeat form Vec: operands Ref("t", <element offset>), values as ints."""
    from opgen.kernel.kir import Vec

    args = [("dst", Ref("t", Lit(dst)))] + [(n, Ref("t", Lit(o))) for n, o in srcs]
    args += [("mask", Lit(mask)), ("repeat", Lit(repeat))] + [(k, Lit(v)) for k, v in vals.items()]
    if params is not None:
        args.append(("params", tuple(Lit(p) for p in params)))
    return Vec(op, tuple(args))


_FILL = (InitBuffer("b", Lit(1024)), Get("t", "b", "float"), vec(Op.DUPLICATE, dst="t", scalar=1.0, count=256),
         Barrier(Pipe.V))
_P = (1, 1, 1, 8, 8, 8)   # contiguous blocks, one 256-B repeat after the other


_OVERLAP_FAULTS = [
    # dst lanes [32, 288) bytes, src0 lanes [0, 256): 7 of 8 blocks shared, not 100 %
    (_rep(Op.ADD_REP, 8, [("src0", 0), ("src1", 128)], 64, 1, _P), r"Add: in repeat 0 dst partly overlaps src0"),
    # repeat 1 reads src1 at the bytes repeat 0 wrote (dst and src1 repeat stride 0): Div has no accumulation rule
    (_rep(Op.DIV_REP, 0, [("src0", 64), ("src1", 0)], 64, 2, (1, 1, 1, 0, 8, 0)),
     r"Div: repeat 1 of src1 \(byte 0\) reads what repeat 0 of the same instruction wrote"),
    # a WholeReduce destination may not sit among its source's lanes, not even at lane 0
    (_rep(Op.WHOLE_REDUCE_SUM, 0, [("src", 0)], 64, 1, dstRep=1, srcBlk=1, srcRep=8),
     r"WholeReduceSum: in repeat 0 dst overlaps the lanes of src at byte 0"),
    (_rep(Op.BRCB, 0, [("src", 0)], 0, 1, (1, 8)), r"Brcb: src must not alias dst"),
]
_OVERLAP_FAULTS = [pytest.param(*c, id=c[0].op.name) for c in _OVERLAP_FAULTS]


def _strip_mask(instr):
    """Brcb has no mask operand (_rep gives every instruction one)."""
    return replace(instr, args=tuple(a for a in instr.args if a[0] != "mask")) if instr.op is Op.BRCB else instr


@pytest.mark.parametrize("instr, message", _OVERLAP_FAULTS)
def test_operands_overlapping_against_the_device_rules_fault(instr, message):
    instr = _strip_mask(instr)
    r = _run_tiny(_tiny(_FILL + (instr,)))
    assert not r.ok and re.search(message, r.first_fault), r.first_fault


_OVERLAP_OK = [
    _rep(Op.ADD_REP, 0, [("src0", 0), ("src1", 64)], 64, 2, _P),            # dst is src0 lane for lane (100 %)
    _rep(Op.ADD_REP, 0, [("src0", 64), ("src1", 0)], 64, 2, (1, 1, 1, 0, 8, 0)),  # accumulation into src1 = dst
    _rep(Op.WHOLE_REDUCE_SUM, 128, [("src", 0)], 64, 2, dstRep=1, srcBlk=1, srcRep=8),  # disjoint
]


@pytest.mark.parametrize("instr", _OVERLAP_OK)
def test_operands_the_device_rules_allow_run(instr):
    r = _run_tiny(_tiny(_FILL + (instr,)))
    assert r.ok, r.first_fault


@pytest.mark.parametrize("src, fault", [(0, True), (64, False)])
def test_an_in_place_gather_faults(src, fault):
    """Gather reading bytes inside its own destination (dst t[0:8], every offset 0 from base src * 4): the
    emulation's in-place fault; reading a disjoint source is fine."""
    from opgen.kernel.kir import Vec

    k = _tiny(_FILL + (Get("o", "b", "uint32_t", Lit(192)), vec(Op.DUPLICATE, dst="o", scalar=0, count=64),
                       Barrier(Pipe.V),
                       Vec(Op.GATHER, (("dst", Ref("t")), ("src", Ref("t")), ("offset", Ref("o")),
                                       ("base", Lit(src * 4)), ("count", Lit(8))))),
              tensors=(TensorVar("t", "float"), TensorVar("o", "uint32_t")))
    r = _run_tiny(k)
    if fault:
        assert not r.ok and "in-place gather" in r.first_fault, r.first_fault
    else:
        assert r.ok, r.first_fault


def test_a_count_form_with_a_partial_overlap_runs_lane_by_lane_as_the_emulation():
    """Adds(t[8], t[0], 1, 16) over t = 0, 1, 2, ...: lanes 0..7 write t[8..15] = t[0..7] + 1, then lanes 8..15
    read those new values: t[16..23] = t[0..7] + 2 (the emulation's per-lane loop, emu/vector.h), not the
    snapshot's t[8..15] + 1 = 9..16."""
    k = _shifted_adds()
    gm = {"x": np.arange(16, dtype=np.float32), "y": np.zeros(24, np.float32)}
    r = ki.run(k, {"n": 8}, gm, 1)
    assert r.ok, r.first_fault
    want = np.array([0, 1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4, 5, 6, 7, 8, 2, 3, 4, 5, 6, 7, 8, 9], np.float32)
    assert np.array_equal(gm["y"], want)


def _shifted_adds() -> KernelClass:
    from opgen.kernel.kir import Vec

    return _tiny((InitBuffer("b", Lit(256)), Get("t", "b", "float"),
               Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(64)), SetFlag(Pipe.MTE2, Pipe.V), WaitFlag(Pipe.MTE2, Pipe.V),
               Vec(Op.ADDS, (("dst", Ref("t", Lit(8))), ("src0", Ref("t")), ("scalar", FConst(1.0)),
                             ("count", Lit(16)))),
               SetFlag(Pipe.V, Pipe.MTE3), WaitFlag(Pipe.V, Pipe.MTE3),
               Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(96))))


@pytest.mark.slow
def test_the_gpp_emulation_agrees_on_operand_overlaps(tmp_path, emu_instances, emu_pch):
    """The overlap cases above printed as C++ and run in the g++ emulation: the same verdict (fault or not) for each,
    and for the shifted count-form Adds the same 24 outputs."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not available")
    fault_cases = [p.values[0] for p in _OVERLAP_FAULTS]
    cases = [("Shift", _shifted_adds(), True)]
    cases += [(f"Bad{i}", _tiny(_FILL + (_strip_mask(v),)), False) for i, v in enumerate(fault_cases)]
    cases += [(f"Good{i}", _tiny(_FILL + (v,)), True) for i, v in enumerate(_OVERLAP_OK)]
    classes = [replace(k, name=n) for n, k, _ in cases]
    gm = {"x": np.arange(16, dtype=np.float32), "y": np.zeros(24, np.float32)}
    emu = run_emu(tmp_path, classes, "TinyTiling", ["n"], {"n": 8}, gm, 1, {}, emu_args(emu_instances, emu_pch))
    for (n, _k, want_ok), k in zip(cases, classes):
        g = {a: v.copy() for a, v in gm.items()}
        r = ki.run(k, {"n": 8}, g, 1, verify_first=False)
        ok, fault, outs = emu[n]
        assert r.ok == ok == want_ok, (n, r.first_fault, fault)
        if ok:
            assert np.array_equal(g["y"], outs["y"]), n


@pytest.mark.parametrize("out_len, fault", [(6, False), (8, True)])
def test_a_repeat_form_result_is_poisoned_lane_by_lane(out_len, fault):
    """A row of 6 floats loaded into an 8-lane block (its 2 pad lanes unwritten) times a full row, repeat form (Mul
    with mask 8): the 6 real lanes of the result are written, the 2 pad lanes not. Copying the 6 lanes out is fine;
    copying all 8 copies unwritten bytes (a fault), as the device would copy garbage there."""
    from opgen.kernel.isa import REPEAT_FORMS
    from opgen.kernel.kir import vec

    stmts = (InitBuffer("b", Lit(256)), Get("t", "b", "float"),
             Copy(Ref("t"), GmView("gmX"), Lit(1), Lit(24)),
             vec(Op.DUPLICATE, dst=Ref("t", Lit(8)), scalar=2.0, count=Lit(8)),
             *_flags(Pipe.MTE2, Pipe.V), Barrier(Pipe.V),
             vec(REPEAT_FORMS[Op.MUL], dst=Ref("t", Lit(16)), src0=Ref("t"), src1=Ref("t", Lit(8)), mask=Lit(8),
                 repeat=Lit(1), params=(Lit(1), Lit(1), Lit(1), Lit(8), Lit(8), Lit(8))),
             *_flags(Pipe.V, Pipe.MTE3),
             Copy(GmView("gmY"), Ref("t", Lit(16)), Lit(1), Lit(4 * out_len)))
    gm = {"x": np.arange(16, dtype=np.float32), "y": np.zeros(16, np.float32)}
    r = ki.run(_tiny(stmts), {"n": 8}, gm, 1, verify_first=False)
    if fault:
        assert not r.ok and "copies unwritten (poisoned) UB byte" in r.first_fault, r.first_fault
    else:
        assert r.ok, r.first_fault
        assert np.array_equal(gm["y"][:6], 2.0 * np.arange(6, dtype=np.float32))


@pytest.mark.parametrize("dtype, ctype", [(np.float16, "half"), (np.float32, "float"), (ml_dtypes.bfloat16, "bfloat16_t")])
def test_a_scalar_read_of_gm_converts_the_element_exactly_and_stays_inside_the_tensor(dtype, ctype):
    """FLoad of a GmView (GlobalTensor::GetValue by the scalar unit, a per-batch input element of the rows family):
    the element converted to fp32 exactly (docs/reference/ascendc.md §1.4), written back through UB; a read past
    the tensor's bytes is a fault naming the tensor; the C++ form reads the element through the skeleton's GmScalar
    (bf16 by ToFloat)."""
    from opgen.kernel.kir import CppPrinter, FLoad, SetValue
    from opgen.kernel.rowfexpr import parse

    def kernel(at):
        body = _INIT + (vec(Op.DUPLICATE, dst=Ref("t"), scalar=0.0, count=Lit(8)),
                        SetFlag(Pipe.V, Pipe.S), WaitFlag(Pipe.V, Pipe.S),
                        SetValue(Ref("t", Lit(1)), FLoad(GmView("gmX", Lit(at)))),
                        SetFlag(Pipe.S, Pipe.MTE3), WaitFlag(Pipe.S, Pipe.MTE3),
                        Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(32)))
        return KernelClass("Tiny", "TinyTiling", args=("x", "y"),
                           gms=(GmTensor("gmX", ctype, "x"), GmTensor("gmY", "float", "y")),
                           locals=(Local("b"),), tensors=(TensorVar("t", "float"),), fields=("n",),
                           process=body)

    x = np.random.default_rng(3).uniform(-5, 5, 16).astype(dtype)
    y = np.full(16, -1, np.float32)
    r = ki.run(kernel(13), {"n": 1}, {"x": x, "y": y}, 1)
    assert r.ok, r.first_fault
    assert y[1].view(np.uint32) == np.float32(x[13]).view(np.uint32) and y[0] == 0 and y[8] == -1
    r = ki.run(kernel(16), {"n": 1}, {"x": x, "y": y}, 1)
    size = 16 * np.dtype(dtype).itemsize   # element 16 is the first byte past the tensor
    assert not r.ok and f"GM tensor 'gmX' at byte {size} outside its {size} bytes" in r.first_fault, r.first_fault
    k = kernel(13)
    assert "SetValue(1, GmScalar(gmX, 13));" in "\n".join(CppPrinter(k).body(k.process, 1, {}))
    # the row programs' per-batch text reads back as the same node
    assert parse("static_cast<float>(gm_w.GetValue(b))", ()) == FLoad(GmView("gm_w", E("b")))


def test_constant_tables_and_struct_fields_set_by_a_method():
    """A ConstTable read by TableAt and a struct filled field by field (StructSet) in a method taking it by
    reference, then read through its GM tensor field and int field, as the head-rows kernels choose their parts:
    the interpreter copies x[t[1][2] ..] to y, the C++ form indexes the constexpr table and assigns the fields, and
    the verifier refuses a constant index outside the table and an integer stored in a GM tensor field."""
    from opgen.ir.dims import Sym
    from opgen.kernel import kir
    from opgen.kernel.kir import Call, ConstTable, CppPrinter, Func, Param, StructDecl, StructLet, StructSet, TableAt

    table = ConstTable("kSel", "int8_t", (2, 3), (0, 8, 16, 4, 12, 8))
    decl = StructDecl("Pick", (("at", "int", "", None), ("src", "gm", "float", 2)), defaults=(("at", 4),))

    def kernel(fill):
        return KernelClass("Tiny", "TinyTiling", args=("x", "y"),
                           gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "float", "y")),
                           locals=(Local("b"),), tensors=(TensorVar("t", "float"),), fields=("n",),
                           structs=(decl,), tables=(table,),
                           methods=(Func("Fill", (Param("j"), Param("p", "struct", "Pick")), tuple(fill)),),
                           process=_INIT + (StructLet("q", "Pick"), Call("Fill", (E("n"), Sym("q"))),
                                            Copy(Ref("t"), GmView("q.src[1]", Sym("q.at")), Lit(1), Lit(32)),
                                            SetFlag(Pipe.MTE2, Pipe.MTE3), WaitFlag(Pipe.MTE2, Pipe.MTE3),
                                            Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(32))))

    k = kernel([StructSet("p.at", TableAt("kSel", (Sym("j"), Lit(2)))), StructSet("p.src[1]", GmView("gmX"))])
    kir.verify(k)
    x = np.arange(32, dtype=np.float32)
    y = np.zeros(8, np.float32)
    r = ki.run(k, {"n": 1}, {"x": x, "y": y}, 1)
    assert r.ok, r.first_fault
    assert np.array_equal(y, x[8:16])   # kSel[1][2] = 8
    r = ki.run(kernel([StructSet("p.src[1]", GmView("gmX"))]), {"n": 1}, {"x": x, "y": y}, 1)
    assert r.ok and np.array_equal(y, x[4:12])   # q.at never set: its member initialiser, 4
    text = "\n".join(CppPrinter(k).func("Fill", k.method("Fill").params, k.method("Fill").body))
    assert "p.at = kSel[j][2];" in text and "p.src[1] = gmX;" in text and "Pick& p)" in text, text
    assert "const Pick& p" not in text   # the method sets its fields: a non-const reference
    with pytest.raises(kir.IRError, match="outside the table"):
        kir.verify(kernel([StructSet("p.at", TableAt("kSel", (Lit(2), Lit(0))))]))
    with pytest.raises(kir.IRError, match="takes a view of a declared GM tensor"):
        kir.verify(kernel([StructSet("p.src[0]", Lit(3))]))
    with pytest.raises(kir.IRError, match=r"value 300 is not an integer in \[-128, 127\] \(int8_t\)"):
        ConstTable("kBad", "int8_t", (2,), (1, 300))
    with pytest.raises(kir.IRError, match="3 values for shape"):
        ConstTable("kBad", "int8_t", (2,), (1, 2, 3))


def test_atomic_adds_of_several_cores_need_no_order_but_what_they_add_to_and_their_readers_do():
    """The GM race rule of atomic adds (SetAtomicAdd: adds of several cores accumulate in any order,
    docs/reference/ascendc.md §1.7), on one launch's cores directly: two unordered adds are no race; an add not
    ordered after the plain write (the zeroing) it adds to is one, though another core's add in between was ordered
    after it; a read ordered after only the last of two unordered adds races with the first (the review's two
    cases)."""
    from types import SimpleNamespace as NS

    fix = ki.PIDX[Pipe.FIX]

    def launch():
        cores = [NS(slot=i, label=f"core{i}", stext=lambda sid, p: f"stmt{sid}") for i in range(4)]
        la = ki._Launch(cores, False)
        la.start()
        return la, NS(name="ws", data=np.zeros(64, np.uint8), workspace=True, dtype="float")

    def acc(la, g, c, write, atomic=False):
        try:
            la.gm_access(la.cores[c], (fix, 1, 0), g, 0, 4, write, atomic)
            return "ok"
        except ki.KirFault as e:
            return str(e)

    la, g = launch()
    assert acc(la, g, 0, True, True) == acc(la, g, 1, True, True) == "ok"   # unordered adds
    la, g = launch()
    assert acc(la, g, 0, True) == "ok"          # core 0 zeroes
    la.K[1][0][:] = 1                          # core 1 ordered after it (a cross-core flag)
    assert acc(la, g, 1, True, True) == "ok"
    assert "race (write-after-write)" in acc(la, g, 2, True, True)   # core 2 is not
    la, g = launch()
    assert acc(la, g, 0, True, True) == acc(la, g, 1, True, True) == "ok"
    la.K[3][1][:] = 1                          # core 3 ordered after core 1's add only
    assert "race (read-after-write)" in acc(la, g, 3, False)


@pytest.mark.parametrize("present", [True, False])
def test_a_call_assigns_a_scalar_declared_before_its_guard(present):
    """Call.assign (a guarded reduction's result, opgen.kernel.rowclass.guarded): the float scalar declared before an
    If on a bool member is assigned inside it and read after it; the interpreter takes the value only when the branch
    runs (2.0 from the method, else the declaration's 0.0), the verifier refuses an assignment to a name not
    declared mutable, and the C++ is `v = Two();` under `if (flag_)`, a bool member compared with 0 printed `!flag_`."""
    from opgen.ir.dims import Sym
    from opgen.kernel.kir import Call, FLet, FRef, Func, IRError, Return, ScalarVar, to_cpp, verify

    two = Func("Two", (), (Return(FConst(2.0)),), "float")
    body = (FLet("v", FConst(0.0), mutable=True), If((Sym("flag_"),), (Call("Two", result="v", assign=True),)),
            If((Constraint("==", Sym("flag_"), Lit(0)),), (FLet("w", FConst(1.0)),)))
    k = replace(_tiny(_INIT + body + (vec(Op.DUPLICATE, dst=Ref("t"), scalar=FRef("v"), count=E("n")),
                                      Copy(GmView("gmY"), Ref("t"), Lit(1), Lit(32)))),
                methods=(two,), scalars=(ScalarVar("flag_", "bool"),))
    k, _ = ks.place_syncs(k)
    gm = {"x": np.zeros(16, np.float32), "y": np.full(16, -1.0, np.float32)}
    r = ki.run(k, {"n": 8}, gm, 1, members={"flag_": present})
    assert r.ok, r.first_fault
    assert np.all(gm["y"][:8] == (2.0 if present else 0.0))
    text = to_cpp(k)
    assert "v = Two();" in text and "if (flag_)" in text and "if (!flag_)" in text
    bad = replace(k, process=_INIT + (Call("Two", result="v", assign=True),))
    with pytest.raises(IRError, match="v is not a mutable float scalar"):
        verify(bad)


@pytest.mark.parametrize("index, traps", [(-1, True), (0, False), (7, False), (8, True)])
def test_an_integer_index_check_compares_as_integers(index, traps):
    """TrapUnless with an int64 value (an index read as an integer, the attention kernels' topk checks): Trap()
    exactly outside [0, bound) in the interpreter, and the C++ compares integers (no float round trip)."""
    from opgen.ir.dims import Sym
    from opgen.kernel.kir import Let, TrapUnless, to_cpp

    k = _tiny((Let("idx", Lit(index)), TrapUnless(Sym("idx"), E("n"), doc="an index into n")))
    r = ki.run(k, {"n": 8}, {"x": np.zeros(16, np.float32), "y": np.zeros(16, np.float32)}, 1)
    assert r.ok != traps and (not traps or re.search(rf"Trap\(\).*index {index} outside \[0, 8\)", r.faults[0]))
    assert "if (!(idx >= 0 && idx < td_->n)) {" in to_cpp(k)


@pytest.mark.parametrize("value, fault", [(3.0, None), (0.0, None), (2.5, "= 2.5 is not a non-negative integer"),
                                          (-1.0, "= -1.0 is not a non-negative integer")])
def test_a_float_index_is_the_integer_its_scalar_holds(value, fault):
    """kir.FIndex (an index read as fp32, the rows family's `sgather` offset): the interpreter takes the integer a
    float scalar holds -- here 3.0 -> 3, which a TrapUnless with bound 4 passes and bound 3 traps -- and faults on a
    value that is not a non-negative integer (the C++ static_cast would truncate 2.5 to 2 and read another
    element); the C++ form is `static_cast<int64_t>(v)`."""
    from opgen.ir.dims import Sym
    from opgen.kernel.kir import FLet, FIndex, Let, TrapUnless, to_cpp

    def run(bound):
        k = _tiny((FLet("v", FConst(value)), Let("i", FIndex("v")), TrapUnless(Sym("i"), E("n"))))
        return k, ki.run(k, {"n": bound}, {"x": np.zeros(16, np.float32), "y": np.zeros(16, np.float32)}, 1)

    k, r = run(int(value) + 1 if value >= 0 else 1)
    if fault:
        assert not r.ok and fault in r.faults[0] and "int(v)" in r.faults[0], r.faults
        return
    assert r.ok, r.faults
    _k, r = run(int(value))   # the integer itself is outside [0, value)
    assert not r.ok and f"index {int(value)} outside [0, {int(value)})" in r.faults[0], r.faults
    assert "static_cast<int64_t>(v)" in to_cpp(k)


def test_a_float_index_of_a_scalar_not_a_float_is_refused_by_the_verifier():
    """kir.verify: FIndex names a float scalar (FLet / FAssign or a float member); an undefined name or an int64
    local is refused naming the scalar."""
    from opgen.kernel.kir import FIndex, IRError, Let, verify

    with pytest.raises(IRError, match=r"int\(w\): scalar w used before it is defined"):
        verify(_tiny((Let("i", FIndex("w")),)))
    with pytest.raises(IRError, match=r"int\(j\): scalar j used before it is a float scalar"):
        verify(_tiny((Let("j", Lit(2)), Let("i", FIndex("j")))))


def test_the_array_overlap_check_agrees_with_the_lane_by_lane_walk():
    """kir_interp._overlap_clean (the repeat-form overlap rules on whole arrays, Interp.overlap's first step) is True
    exactly when the lane-by-lane walk (_overlap_walk) raises nothing: 3000 random instructions (binary forms with
    and without accumulation, WholeReduces; offsets, block and repeat strides drawn small so that operands overlap
    often, half of them with src1 at dst's offset), about as many faulting as clean."""
    from types import SimpleNamespace

    from opgen.kernel.isa import lane_grid
    from opgen.kernel.kir_interp import KirFault, _overlap_clean, _overlap_walk

    rng = np.random.default_rng(7)
    verdicts = {True: 0, False: 0}
    for _ in range(3000):
        sz = int(rng.choice([2, 4]))
        whole = bool(rng.random() < 0.3)
        rep, mask = int(rng.integers(1, 6)), int(rng.integers(1, 256 // sz + 1))
        off = {n: int(rng.integers(0, 4)) * 32 for n in ("dst", "src0", "src1")}
        blk = {n: int(rng.integers(0, 3)) for n in off}
        rst = {n: int(rng.integers(0, 10)) for n in off}
        if rng.random() < 0.5:
            off["src1"], blk["src1"], rst["src1"] = off["dst"], blk["dst"], rst["dst"]
        names = ("dst", "src") if whole else ("dst", "src0", "src1")
        tens = {n: SimpleNamespace(off=off["src0" if n == "src" else n]) for n in names}
        if whole:   # the index arrays as Interp.strided passes them
            idx = {"src": lane_grid(rep, mask, blk["src0"], rst["src0"], sz),
                   "dst": np.arange(rep, dtype=np.int64) * rst["dst"]}
        else:
            idx = {n: lane_grid(rep, mask, blk[n], rst[n], sz) for n in names}
        acc1 = not whole and bool(rng.random() < 0.3)
        try:
            _overlap_walk("Op", tens, idx, sz, mask, rep, whole, acc1)
            walked = True
        except KirFault:
            walked = False
        assert _overlap_clean(tens, idx, sz, rep, whole, acc1) == walked, (tens, idx, sz, mask, rep, whole, acc1)
        verdicts[walked] += 1
    assert min(verdicts.values()) > 500, verdicts


def test_a_one_block_touch_keeps_the_array_forms_verdicts_and_records():
    """_Core.touch_block (the race shadow's rules for one 32-byte block on Python ints, what most touches of a
    strided instruction take) against touch_blocks (the same rules on arrays, for any run of blocks) from the same
    random shadows, vector clocks and accesses (each pipe; reads and writes; clocks drawn small so that V's own
    in-place read, ordered and unordered accesses all occur): the same fault text, or the same seven shadow arrays
    after the access; about as many faulting as clean."""
    rng = np.random.default_rng(11)
    npipes = ki._NP
    names = ("w_clock", "w_pipe", "w_stmt", "r_clock", "r_stmt", "p_clock", "p_stmt")
    verdicts = {True: 0, False: 0}
    for _ in range(4000):
        nb, hi = int(rng.integers(1, 4)), int(rng.integers(1, 6))
        state = dict(know=rng.integers(-1, hi, (npipes, npipes)), w_clock=rng.integers(0, hi, nb),
                     w_pipe=rng.integers(0, npipes, nb), w_stmt=rng.integers(0, 9, nb),
                     r_clock=rng.integers(0, hi, (nb, npipes)), r_stmt=rng.integers(0, 9, (nb, npipes)),
                     p_clock=rng.integers(0, hi, nb), p_stmt=rng.integers(0, 9, nb))
        ins = (int(rng.integers(0, npipes)), int(rng.integers(1, hi + 1)), int(rng.integers(0, 9)))
        j, write = int(rng.integers(0, nb)), bool(rng.integers(0, 2))
        got = []
        for one in (True, False):
            core = object.__new__(ki._Core)
            core.know, core.stmts = state["know"].copy(), [(f"s{i}", "M") for i in range(9)]
            sh = ki.Shadow(nb * ki.BLOCK, "UB")
            for n in names:   # into the shadow's own arrays: its dtypes (int32 clocks, int8 pipes) are tested
                getattr(sh, n)[...] = state[n]
            try:
                core.touch_block(sh, j, ins, write) if one else core.touch_blocks(sh, j, j, ins, write)
                fault = None
            except ki.KirFault as e:
                fault = str(e)
            got.append((fault, [getattr(sh, n) for n in names]))
        assert got[0][0] == got[1][0], (state, ins, j, write)
        if got[0][0] is None:
            assert all(np.array_equal(a, b) for a, b in zip(got[0][1], got[1][1])), (state, ins, j, write)
        verdicts[got[0][0] is None] += 1
    assert min(verdicts.values()) > 1000, verdicts
