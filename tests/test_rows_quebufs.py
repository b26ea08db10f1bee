"""ROW_SPLIT's row queues with one buffer where two would cap the rows of a pass and one is priced lower
(opgen.tiling.rows.row_split, the field rowQueBufs; opgen.kernel.rowsched `free_after_last_use` /
`alloc_before_first_use`), two buffers copying the next pass in before this one is computed (rowsched.pass_loop):
the UB plan counted by hand, the buffers' lifetimes in the emitted Compute, the pass loop's order in the Kernel IR,
and the emulated kernel's values against float64."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.kernel import kir
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
UB = 196608   # ascend910b1: UB bytes of an AIV core (docs/reference/ascendc.md §3)


def _tiling(name: str, dims: dict, dtypes: dict) -> dict:
    from opgen.ir.dtypes import parse_dtype
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import evaluate
    from opgen.tiling.pipeline import kernel_build

    spec = load_spec(str(EX / name))
    u = kernel_build(spec)
    return evaluate(spec, u.tiling.program, u.tiling.inputs, dims, {k: parse_dtype(v) for k, v in dtypes.items()},
                    PLATFORMS["ascend910b1"], {})


def _lngv3_row_bytes(H: int, bufs: int) -> int:
    """LayerNormGradV3's ROW_SPLIT bytes a row of a pass (T bf16), from the spec: dy and x in and pd_x out (2 B an
    element, `bufs` buffers each), three fp32 row temporaries (z, dy then dy * z then g * z, g then dx), rstd and mean
    (fp32, two buffers each), RowsSum's 64-float scratch and the two row sums (fp32)."""
    return 3 * bufs * H * 2 + 3 * H * 4 + 2 * 2 * 4 + 64 * 4 + 2 * 4


def _lngv3_fixed_bytes(H: int, u_bytes: int) -> int:
    """... and its bytes held once: gamma and the two column sums (fp32 rows), gamma's staging row (max(4, U)) and
    the column sums' output staging row (fp32), ReduceSum's result block and scratch (a (value, index) pair a
    64-lane repeat, a block rounded), the 32-byte rounding slack of the two row-sum slots and of the four stat
    buffers."""
    return 3 * H * 4 + H * max(4, u_bytes) + H * 4 + (-(-(2 * -(-H // 64)) // 8) * 8 + 8) * 4 + 2 * 8 * 4 + 4 * 8 * 4


@pytest.mark.parametrize("u", ["float32", "bfloat16"])
def test_layer_norm_grad_at_1152_takes_one_buffer_that_compute_fetches(u):
    """LayerNormGradV3 4096 x 1152 (T bf16; the bench's row) on 48 cores: 86 rows a core. With two buffers per
    row queue (UB - fixed) // 27928 = 6 rows a pass fit; with one (UB - 23424) // 21016 = 8. Two buffers were taken
    while the one-buffer loop copied each pass in after the previous compute; now that its Compute issues the next
    pass's copy-in right after it frees the row inputs (ComputeFetch) one buffer is priced lower
    (tests/test_cost_overlap.py) and taken: 8 rows a pass, 11 passes instead of 15."""
    H = 1152
    tl = _tiling("layer_norm_grad.py", {"Bd": (4096,), "H": H}, {"T": "bfloat16", "U": u})
    fixed = _lngv3_fixed_bytes(H, 4 if u == "float32" else 2)
    two, one = _lngv3_row_bytes(H, 2), _lngv3_row_bytes(H, 1)
    assert (fixed, two, one) == (23424, 27928, 21016)
    assert (UB - fixed) // two == 6 and (UB - fixed) // one == 8
    assert tl["strategy"] == 1 and tl["blockDim"] == 48 and tl["rowQueBufs"] == 1, tl
    assert (tl["fixedBytes"], tl["rowBytes"], tl["rowBytesTwoBufs"]) == (fixed, one, two)
    assert tl["rowsPerPass"] == 8 and tl["passCyclesOneBuf"] < tl["passCyclesTwoBufs"]
    assert tl["fixedBytes"] + tl["rowsPerPass"] * tl["rowBytes"] <= UB


def _calls(stmts) -> list:
    """The pass loop's statements as (kind, name, args as text): calls, loops, lets, flags."""
    out = []
    for s in stmts:
        if isinstance(s, kir.Call):
            out.append(("call", s.method, tuple(str(a) for a in s.args)))
        elif isinstance(s, kir.For):
            out.append(("for", s.var, (str(s.lo), str(s.hi))))
        elif isinstance(s, kir.Let):
            out.append(("let", s.name, (str(s.value),)))
        elif isinstance(s, (kir.SetFlag, kir.WaitFlag)):
            out.append((type(s).__name__, s.event, (str(s.id),)))
        elif isinstance(s, kir.DeQue):
            out.append(("DeQue", s.queue, (s.var,)))
        elif isinstance(s, kir.Scope):
            out.append(("scope", "", ()))
    return out


def test_the_pass_loop_copies_the_next_pass_in_before_this_one_is_computed():
    """LayerNormGradV3's RowSplit in the Kernel IR (synchronised): with two buffers per row queue (rowQueBufs 2) the
    first pass is copied in before the loop; one loop runs every pass (its work, Compute / CopyOut, written once),
    each iteration dequeuing this pass's buffers before it copies the next pass (rowNext, min(pass, rowEnd_ -
    rowNext) rows, none past rowEnd_) in, so no queue holds two enqueued buffers (TQue depth 1; double buffering is
    the InitBuffer count, docs/reference/ascendc.md §1.5); the buffer enqueued past the last pass is dequeued and
    freed after the loop. The MTE2 -> S flag that orders the statistics' copy-in before the scalar unit reads them is
    set at the top of the iteration, before the next pass's copy-in, and waited before the compute (so the scalar
    unit waits for this pass's copy-in, not the next one's); no pair before the loop. With one buffer (rowQueBufs 1)
    the first pass is copied in before the loop, each iteration dequeues its buffers and calls ComputeFetch, which
    copies the next pass in (tests below), and the buffers enqueued past the last pass are drained after it."""
    from opgen.check.kirengine import kernel_classes

    (k,) = kernel_classes(load_spec(str(EX / "layer_norm_grad.py")))
    rs = k.method("RowSplit").body
    (split,) = [s for s in rs if isinstance(s, kir.If) and "rowQueBufs" in str(s.cond)]
    assert [str(c) for c in split.cond] == ["rowQueBufs == 1"]
    one = [s for s in split.then if isinstance(s, kir.For)]
    assert len(one) == 1 and [c[:2] for c in _calls(one[0].body) if c[0] in ("call", "DeQue")] == [
        ("DeQue", "rowInQue_dy"), ("DeQue", "rowInQue_x"), ("DeQue", "statInQue_rstd_mean"),
        ("call", "ComputeFetch"), ("call", "CopyOut")]
    assert [s.num for s in split.then if isinstance(s, kir.InitBuffer)] == [1, 1, 1]
    first = _calls(split.then)
    assert ("call", "CopyIn", ("rowStart_", "min(pass, rowEnd_ - rowStart_)")) in first
    assert [[type(x).__name__ for x in s.body] for s in split.then[split.then.index(one[0]) + 1:]] == [
        ["DeQue", "Free"]] * 3
    two = [s for s in split.orelse if not isinstance(s, kir.InitBuffer)]
    assert [s.num for s in split.orelse if isinstance(s, kir.InitBuffer)] == [2, 2, 2]
    top = _calls(two)
    assert top[0] == ("call", "CopyIn", ("rowStart_", "min(pass, rowEnd_ - rowStart_)"))
    assert top[1] == ("for", "r0", ("rowStart_", "rowEnd_")) and not any(c[0] == "SetFlag" for c in top)
    (loop,) = [s for s in two if isinstance(s, kir.For)]
    assert str(loop.step) == "pass" and loop.tail == "k" and loop.pipelined
    body = _calls(loop.body)
    kinds = [c[0] if c[0] in ("SetFlag", "WaitFlag") else c[1] for c in body]
    assert kinds == ["SetFlag", "rowInQue_dy", "rowInQue_x", "statInQue_rstd_mean", "rowNext",
                     "CopyIn", "WaitFlag", "Compute", "CopyOut"], body
    assert body[0][1] == body[6][1] == "MTE2_S"
    assert body[4] == ("let", "rowNext", ("r0 + pass",))
    assert body[5] == ("call", "CopyIn", ("rowNext", "min(pass, rowEnd_ - rowNext)"))
    # after the loop: the buffer enqueued past the last pass, dequeued and freed; nothing else (rstd and mean share
    # one queue: docs/design.md "Event ids of the queues")
    after = [s for s in two[two.index(loop) + 1:]]
    assert [[type(x).__name__ for x in s.body] for s in after] == [["DeQue", "Free"]] * 3
    # the work once in RowSplit
    assert [c.method for c in kir.walk(rs) if isinstance(c, kir.Call) and c.method.startswith("Compute")] == [
        "ComputeFetch", "Compute"]
    # every queue depth 1: no pass enqueues a buffer while another is enqueued
    assert {b.name: b.depth for b in k.locals if b.queue} == {b.name: 1 for b in k.locals if b.queue}


def test_two_buffers_stay_where_the_rows_fit_or_one_buys_no_row():
    """Two buffers a queue where they already fit every row a pass could take (LayerNormGradV3, 96 rows on 48
    cores: 2 rows a core), and where one buffer fits no more rows (H = 4096: one row a pass either way)."""
    small = _tiling("layer_norm_grad.py", {"Bd": (96,), "H": 1152}, {"T": "bfloat16", "U": "float32"})
    assert small["rowQueBufs"] == 2 and small["rowsPerPass"] == 2 and small["rowBytes"] == _lngv3_row_bytes(1152, 2)
    wide = _tiling("layer_norm_grad.py", {"Bd": (4096,), "H": 4096}, {"T": "bfloat16", "U": "float32"})
    assert wide["rowQueBufs"] == 2 and wide["rowsPerPass"] == 1 == wide["rowsFitOneBuf"]


def test_compute_frees_each_input_after_its_last_read_and_allocates_the_output_before_its_first_write():
    """In every branch of LayerNormGradV3's Compute, x's buffer is freed right after the cast that reads it (the
    first instruction of the pass), dy's right after its cast, and pd_x's is allocated right before the cast that
    writes it (the last): a queue of one buffer overlaps the next pass's copy-in and this pass's copy-out with
    everything between."""
    from opgen.check.kirengine import kernel_classes

    (k,) = kernel_classes(load_spec(str(EX / "layer_norm_grad.py")))
    body = k.method("Compute").body

    # the three ways a pass runs (rowsched.BLOCK_FITS: eight rows a repeat; ROWS_REDUCE_FITS: the row reductions
    # over all rows; else row by row reductions), each over all rows of the pass
    (top,) = [s for s in body if isinstance(s, kir.If)]
    (inner,) = [s for s in top.orelse if isinstance(s, kir.If)]
    branches = [top.then, inner.then, inner.orelse]
    for b in branches:
        kinds = [(s.op.name, s.arg("src").tensor if s.op.name == "CAST_FROM" else s.arg("dst").tensor)
                 if isinstance(s, kir.Vec) and s.op.name in ("CAST_FROM", "CAST_TO") else
                 (type(s).__name__, s.var) if isinstance(s, (kir.Free, kir.Alloc)) else None for s in b]
        for name in ("rowIn_x", "rowIn_dy"):
            at = kinds.index(("CAST_FROM", name))
            assert kinds[at + 1] == ("Free", name), (name, kinds)
            assert ("CAST_FROM", name) not in kinds[at + 1:]
        at = kinds.index(("Alloc", "rowOut_pd_x"))
        assert [x for x in kinds[at + 1:] if x is not None] == [("CAST_TO", "rowOut_pd_x")], kinds


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.slow
def test_layer_norm_grad_prefetched_passes_against_float64(examples_gen):
    """LayerNormGradV3 768 x 1152 (T bf16, U fp32) on 48 cores: 16 rows a core, 6 rows a pass with two buffers per
    row queue: passes of 6, 6 and 4 rows, the next copied in before this one is computed (rowsched.pass_loop). The
    emulation (strict UB bounds, queue depth and pipe races) runs it without a fault, and its outputs match float64
    NumPy of the spec's formulas: dx within bf16's rounding, the column sums over 768 rows within fp32's."""
    from opgen.check import run_check

    r = run_check(str(EX / "layer_norm_grad.py"), dims={"Bd": (768,), "H": 1152},
                  dtypes={"T": "bfloat16", "U": "float32"}, gen_dir=examples_gen, seed=5, progress=False)
    assert r.passed and not r.faults and r.tiling_key % 10 == 1
    tl = _tiling("layer_norm_grad.py", {"Bd": (768,), "H": 1152}, {"T": "bfloat16", "U": "float32"})
    assert tl["rowQueBufs"] == 2 and tl["rowsPerPass"] == 6
    f = {n: np.asarray(r.inputs[n], np.float64) for n in ("dy", "x", "rstd", "mean", "gamma")}
    z = (f["x"] - f["mean"]) * f["rstd"]
    g = f["dy"] * f["gamma"]
    dx = f["rstd"] * (g - g.mean(-1, keepdims=True) - z * (g * z).mean(-1, keepdims=True))
    dgamma, dbeta = (f["dy"] * z).sum(0), f["dy"].sum(0)
    out = {n: np.asarray(r.arrays[n], np.float64) for n in ("pd_x", "pd_gamma", "pd_beta")}
    assert np.allclose(out["pd_x"], dx, rtol=2.0**-7, atol=2.0**-10 * np.abs(dx).max())
    assert np.allclose(out["pd_gamma"], dgamma, rtol=2.0**-16, atol=2.0**-18 * np.abs(f["dy"] * z).sum(0).max())
    assert np.allclose(out["pd_beta"], dbeta, rtol=2.0**-16, atol=2.0**-18 * np.abs(f["dy"]).sum(0).max())


@pytest.mark.parametrize("path, cls, queues", [
    (EX / "layer_norm_grad.py", "LayerNormGradV3Kernel0",
     ("statInQue_rstd_mean (2)", "paramQue_ (1)", "rowInQue_dy (2)", "rowInQue_x (2)")),
    (ROOT / "specs" / "norm_rope_concat_grad.py", "NormRopeConcatGradKernel",
     ("inQue0_ (2)", "inQue1_ (2)", "statInQue_ (2)", "paramQue_ (1)")),
])
def test_the_statistics_share_one_queue_so_the_freed_buffers_fit_the_pool(path, cls, queues):
    """A queue buffer freed and not yet allocated again holds one id of its FreeTensor's HardEvent (V_MTE2 for
    VECIN) from the TPipe's pool of 8, and after the passes every buffer is freed (docs/design.md "Event ids of
    the queues"). Counted by hand from the schedules: LayerNormGradV3's ROW_SPLIT (two buffers each for dy, x and
    the statistics, one for the column rows' staging) and NormRopeConcatGrad's parts (two row inputs, the
    statistics, the staging row) hold 2 + 2 + 2 + 1 = 7 with rstd and mean (the two statistic slots) in one queue;
    a queue each made 9, past the pool (both engines fault on it: tests/test_kir_interp.py
    test_a_ninth_freed_buffer_exhausts_the_pool)."""
    from opgen.check.kirengine import kernel_classes

    (k,) = [c for c in kernel_classes(load_spec(str(path))) if c.name == cls]
    n, qs = kir.queue_event_buffers(k)["V_MTE2"]
    assert n == 7 and sorted(qs) == sorted(queues), (n, qs)
    assert n <= kir.POOL_IDS


def _no_fetch(stmts) -> tuple:
    """`stmts` without the CopyIn calls and the synchronisation the dependency pass placed (flags, PIPE_V
    barriers), nested statements included."""
    out = []
    for s in stmts:
        if isinstance(s, kir.Call) and s.method == "CopyIn" or isinstance(s, (kir.SetFlag, kir.WaitFlag, kir.Barrier)):
            continue
        if isinstance(s, kir.If):
            s = dataclasses.replace(s, then=_no_fetch(s.then), orelse=_no_fetch(s.orelse))
        out.append(s)
    return tuple(out)


def test_compute_fetch_copies_the_next_pass_in_right_after_the_last_input_is_freed():
    """LayerNormGradV3's ComputeFetch (the one-buffer pass loop's, rowsched.fetch_loop) is Compute with one more
    statement in each of its three forms (eight rows a repeat, the row reductions over all rows, row by row): the
    next pass's CopyIn(r0 + rowsPerPass, min(rowsPerPass, rowEnd_ - (r0 + rowsPerPass))) right after the FreeTensor
    of dy, the later of the two row inputs freed, so the copy runs beside the rest of the pass."""
    from opgen.check.kirengine import kernel_classes

    (k,) = kernel_classes(load_spec(str(EX / "layer_norm_grad.py")))
    comp, fetch = k.method("Compute").body, k.method("ComputeFetch").body
    assert _no_fetch(fetch) == _no_fetch(comp)
    (top,) = [s for s in fetch if isinstance(s, kir.If)]
    (inner,) = [s for s in top.orelse if isinstance(s, kir.If)]
    for b in (top.then, inner.then, inner.orelse):
        (at,) = [j for j, s in enumerate(b) if isinstance(s, kir.Call) and s.method == "CopyIn"]
        assert isinstance(b[at - 1], kir.Free) and b[at - 1].var == "rowIn_dy", b[at - 1]
        assert [str(a) for a in b[at].args] == ["r0 + rowsPerPass",
                                                 "min(rowsPerPass, rowEnd_ - (r0 + rowsPerPass))"]
        assert not any(isinstance(s, kir.Free) and s.queue.startswith("rowInQue_") for s in b[at:])


def _lngv3_float64(r):
    """LayerNormGradV3's outputs in float64 NumPy from the check's inputs (the spec's formulas): dx, dgamma, dbeta,
    and the sums of |dy * z| and |dy| (the column sums' error scale)."""
    f = {n: np.asarray(r.inputs[n], np.float64) for n in ("dy", "x", "rstd", "mean", "gamma")}
    h = f["x"].shape[-1]
    f = {n: v.reshape(-1, v.shape[-1]) if n != "gamma" else v for n, v in f.items()}
    z = (f["x"] - f["mean"]) * f["rstd"]
    g = f["dy"] * f["gamma"]
    dx = f["rstd"] * (g - g.mean(-1, keepdims=True) - z * (g * z).mean(-1, keepdims=True))
    assert dx.shape[-1] == h
    return dx, (f["dy"] * z).sum(0), f["dy"].sum(0), np.abs(f["dy"] * z).sum(0), np.abs(f["dy"]).sum(0)


def _assert_lngv3(r, t: str):
    """The check's outputs within `t`'s rounding of dx (bf16 / fp16 / fp32) and fp32 sums over the rows."""
    dx, dgamma, dbeta, sgz, sb = _lngv3_float64(r)
    out = {n: np.asarray(r.arrays[n], np.float64).reshape(-1, dx.shape[-1]) if n == "pd_x" else
           np.asarray(r.arrays[n], np.float64) for n in ("pd_x", "pd_gamma", "pd_beta")}
    u = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-20}[t]
    assert np.all(np.abs(out["pd_x"] - dx) <= 2 * u * np.abs(dx) + 2.0**-10 * u * 256 * np.abs(dx).max())
    ug = max(u, 2.0**-14)   # the column sums are stored as U (bf16 / fp32 in these cases)
    assert np.all(np.abs(out["pd_gamma"] - dgamma) <= 2 * ug * np.abs(dgamma) + 2.0**-16 * sgz)
    assert np.all(np.abs(out["pd_beta"] - dbeta) <= 2 * ug * np.abs(dbeta) + 2.0**-16 * sb)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_layer_norm_grad_fetched_passes_against_float64(examples_gen):
    """LayerNormGradV3 4096 x 1152 (T bf16, U fp32; the bench's size) takes one buffer a row queue and ComputeFetch
    (8 rows a pass; 86 or 85 rows a core: passes of 8 and a last of 6 or 5): no fault in the emulation (strict UB
    bounds, queue depths and pipe races), outputs equal to float64 NumPy within bf16's rounding (dx) and fp32 sums
    over 4096 rows (dgamma, dbeta). (The Kernel IR interpreter takes minutes at this size: both engines run the
    forced cases below.)"""
    from opgen.check import run_check

    r = run_check(str(EX / "layer_norm_grad.py"), dims={"Bd": (4096,), "H": 1152},
                  dtypes={"T": "bfloat16", "U": "float32"}, gen_dir=examples_gen, seed=7, progress=False)
    assert r.passed and not r.faults and r.tiling_key % 10 == 1, r.faults[:3]
    tl = _tiling("layer_norm_grad.py", {"Bd": (4096,), "H": 1152}, {"T": "bfloat16", "U": "float32"})
    assert tl["rowQueBufs"] == 1 and tl["rowsPerPass"] == 8
    _assert_lngv3(r, "bfloat16")


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("engine", ["emu", "kir"])
@pytest.mark.parametrize("rows, h, t, u, per_pass", [
    (245, 1152, "float16", "float32", 4),     # eight rows a repeat; 5 or 6 rows a core: passes of 4 and 1 or 2
    (245, 37, "float32", "float32", 2),       # odd rows of one repeat: the row reductions over all rows
    (245, 2051, "bfloat16", "bfloat16", 0),   # odd rows past 2040 elements: row by row (4 rows a pass fit)
])
def test_forced_one_buffer_fetched_passes_against_float64(engine, rows, h, t, u, per_pass, tmp_path, monkeypatch):
    """ComputeFetch in each of Compute's three forms, the tiling made to take one buffer a row queue (rowQueBufs 1;
    and, where given, fewer rows a pass than fit, for several passes a core with a shorter last one): 245 rows on
    48 cores (5 or 6 a core), odd H, fp16 / fp32 / bf16 rows, both engines (emu: the generated TilingFunc patched,
    tests/forced_tiling.py; kir: the tiling program's evaluation, which that engine launches with, patched alike).
    No fault, and the outputs equal float64 NumPy of the spec's formulas."""
    from forced_tiling import forced_package

    from opgen.check import run_check
    from opgen.tiling import emit

    gen = None
    if engine == "emu":
        gen = forced_package(tmp_path, EX / "layer_norm_grad.py", lets={"rowQueBufs": "1"},
                             fields={"rowsPerPass": str(per_pass)} if per_pass else None)
    else:
        real, seen = emit.evaluate, []

        def forced(*a, **k):
            tl = real(*a, **k)
            if tl.get("strategy") == 1:
                seen.append(tl["rowsFitOneBuf"])
                fit = tl["rowsFitOneBuf"]
                tl = {**tl, "rowQueBufs": 1, "rowsPerPass": min(per_pass or fit, fit, tl["rowsPerPass"] if
                                                                    tl["rowQueBufs"] == 1 else fit)}
            return tl
        monkeypatch.setattr(emit, "evaluate", forced)
    r = run_check(str(EX / "layer_norm_grad.py"), dims={"Bd": (rows,), "H": h}, dtypes={"T": t, "U": u},
                  gen_dir=gen, seed=h, progress=False, engine=engine)
    assert r.passed and not r.faults and r.tiling_key % 10 == 1, r.faults[:3]
    assert engine == "emu" or seen
    _assert_lngv3(r, t)
