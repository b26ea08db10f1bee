"""ROW_SPLIT's row queues with one buffer where two would cap the rows of a pass and one is priced lower
(opgen.tiling.rows.row_split, the field rowQueBufs; opgen.kernel.rowsched `free_after_last_use` /
`alloc_before_first_use`), two buffers copying the next pass in before this one is computed (rowsched.pass_loop):
the UB plan counted by hand, the buffers' lifetimes in the emitted Compute, the pass loop's order in the Kernel IR,
and the emulated kernel's values against float64."""

from __future__ import annotations

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
def test_layer_norm_grad_at_1152_keeps_two_buffers_that_prefetch(u):
    """LayerNormGradV3 4096 x 1152 (T bf16; the bench's row) on 48 cores: 86 rows a core. With two buffers per
    row queue (UB - fixed) // 27928 = 6 rows a pass fit; with one (UB - 23424) // 21016 = 8. One buffer was taken
    while the pass loop copied each pass in after the previous compute (11 passes instead of 15); now that two
    buffers copy the next pass in before this one is computed they are priced lower (tests/test_cost_overlap.py)
    and taken, 6 rows a pass."""
    H = 1152
    tl = _tiling("layer_norm_grad.py", {"Bd": (4096,), "H": H}, {"T": "bfloat16", "U": u})
    fixed = _lngv3_fixed_bytes(H, 4 if u == "float32" else 2)
    two, one = _lngv3_row_bytes(H, 2), _lngv3_row_bytes(H, 1)
    assert (fixed, two, one) == (23424, 27928, 21016)
    assert (UB - fixed) // two == 6 and (UB - fixed) // one == 8
    assert tl["strategy"] == 1 and tl["blockDim"] == 48 and tl["rowQueBufs"] == 2, tl
    assert (tl["fixedBytes"], tl["rowBytes"], tl["rowBytesOneBuf"]) == (fixed, two, one)
    assert tl["rowsPerPass"] == 6 and tl["passCyclesTwoBufs"] < tl["passCyclesOneBuf"]
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
    each pass is copied in and dequeued right before its compute."""
    from opgen.check.kirengine import kernel_classes

    (k,) = kernel_classes(load_spec(str(EX / "layer_norm_grad.py")))
    rs = k.method("RowSplit").body
    (split,) = [s for s in rs if isinstance(s, kir.If) and "rowQueBufs" in str(s.cond)]
    assert [str(c) for c in split.cond] == ["rowQueBufs == 1"]
    one = [s for s in split.then if isinstance(s, kir.For)]
    assert len(one) == 1 and [c[:2] for c in _calls(one[0].body) if c[0] in ("call", "DeQue")] == [
        ("call", "CopyIn"), ("DeQue", "rowInQue_dy"), ("DeQue", "rowInQue_x"), ("DeQue", "statInQue_rstd_mean"),
        ("call", "Compute"), ("call", "CopyOut")]
    assert [s.num for s in split.then if isinstance(s, kir.InitBuffer)] == [1, 1, 1]
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
    assert [c.method for c in kir.walk(rs) if isinstance(c, kir.Call) and c.method == "Compute"] == ["Compute"] * 2
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
