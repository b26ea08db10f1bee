"""Copy/compute overlap in the rows tiling (docs/design.md "Copy/compute overlap"): the pass formula
(opgen.platforms.cost.pass_cycles / pipeline_cycles) on cases worked out by hand, the fractions the Kernel IR gives
(opgen.kernel.rowsched.queue_overlap) on a hand-made Compute, and the choice of one or two buffers per row queue
(rowQueBufs) against its price computed by hand (the emulation's time line: tests/test_cost_timeline.py)."""

from __future__ import annotations

import copy
import math
from fractions import Fraction
from pathlib import Path

import pytest

from opgen.ir.dims import Lit
from opgen.kernel import kir
from opgen.kernel.isa import Op
from opgen.platforms import cost

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples" / "specs"

# docs/reference/kernel_cost.md §2
CLOCK, HBM, BURST, ISSUE, BARRIER = 1.8e9, 1.6e12, 256, 8, 16


def test_pass_cycles_by_hand():
    """Two buffers: max(t_c, s t_c + t_in, t_out); one buffer: max(t_c, max(a, s) t_c + t_in, (1 - b) t_c + t_out);
    P passes: max(t_in + P pass + t_out, P (t_in + t_out))."""
    h = Fraction(1, 2)
    # copies shorter than the compute: two buffers hide them, one buffer freed half-way hides the copy-in too
    assert cost.pass_cycles(60, 100, 50, 2, h, h) == 100
    assert cost.pass_cycles(40, 100, 30, 1, h, h) == 100
    # ... but not a copy-in longer than the compute left after the free: 50 + 60 = 110
    assert cost.pass_cycles(60, 100, 50, 1, h, h) == 110
    # held throughout (a = 1, b = 0): the sum with the longer copy
    assert cost.pass_cycles(60, 100, 50, 1, Fraction(1), Fraction(0)) == 160
    # the output allocated at a quarter: the previous copy-out must end by then: 75 + 50 = 125
    assert cost.pass_cycles(10, 100, 50, 1, Fraction(0), Fraction(1, 4)) == 125
    # a scalar wait at 80 % holds the next copy-in for two buffers too: 80 + 60 = 140
    assert cost.pass_cycles(60, 100, 50, 2, h, h, s=Fraction(4, 5)) == 140
    assert cost.pass_cycles(60, 100, 50, 1, Fraction(1, 5), h, s=Fraction(4, 5)) == 140
    # four passes: fill + 4 x 110 + drain = 60 + 440 + 50 = 550, above the copies' 4 x 110
    assert cost.pipeline_cycles(4, 60, 100, 50, 1, h, h) == 550
    # memory-bound: the copies' 4 x (70 + 70) = 560 over 70 + 4 x 70 + 70 = 420
    assert cost.pipeline_cycles(4, 70, 20, 70, 2, h, h) == 560


def test_prefetched_pass_cycles_by_hand():
    """Two buffers, the next pass copied in before this one is computed: the copy-in of pass i + 2 is issued when
    Compute(i) returns (its last scalar wait, s) into the buffer it freed (a), so two passes cover max(a, s) t_c +
    t_in, and two passes cover (1 - b) t_c + t_out for the output; both are within 2 max(t_c, t_in, t_out), so a
    pass is the slowest stage: max(t_c, t_in, t_out)."""
    h, f = Fraction(1, 2), Fraction(4, 5)
    # the scalar wait at 80 % that held two buffers to 80 + 60 = 140 a pass: hidden, the compute's 100
    assert cost.pass_cycles(60, 100, 50, 2, h, h, s=f, prefetch=True) == 100
    assert cost.pass_cycles(60, 100, 50, 2, h, h, s=f) == 140
    # a copy-in longer than the compute, the buffer freed and the scalar wait at the end: the copy's 150 a pass
    # ((1 x 100 + 150) / 2 = 125 for two passes' chain)
    assert cost.pass_cycles(150, 100, 50, 2, Fraction(1), Fraction(0), s=Fraction(1), prefetch=True) == 150
    # the copy-out the slowest stage
    assert cost.pass_cycles(10, 100, 120, 2, h, Fraction(0), prefetch=True) == 120
    # three passes: fill 60 + 3 x 100 + drain 50 = 410 over the copies' 3 x 110
    assert cost.pipeline_cycles(3, 60, 100, 50, 2, h, h, s=f, prefetch=True) == 410


def _v(dst: str) -> kir.Vec:
    return kir.Vec(Op.ADD, (("dst", kir.Ref(dst)), ("src0", kir.Ref("p")), ("src1", kir.Ref("q")), ("count", Lit(8))))


def test_queue_overlap_of_a_hand_made_compute():
    """a: vector instructions before the last row-input free over the pass's; b: before the first row-output
    allocation; s: before the last scalar read of a tensor a vector instruction wrote; an if's branches apart."""
    from opgen.kernel.rowsched import queue_overlap

    body = (kir.DeQue("rowIn_x", "rowInQue_x", "T"),
            _v("t0"), _v("t1"),
            kir.Free("rowInQue_x", "rowIn_x"),                       # after 2 of 6
            _v("t2"),
            kir.GetValue("s0", kir.Ref("t1")),                       # after 3 of 6: t1 written by V
            kir.GetValue("s1", kir.Ref("statIn_m")),                 # not written by V: no wait
            kir.If((), (_v("t3"), kir.Alloc("rowOut_y", "rowOutQue_y", "T")),     # after 4 of 6
               (kir.Alloc("rowOut_y", "rowOutQue_y", "T"), _v("t3"))),           # after 3 of 6
            _v("rowOut_y"), _v("t4"),
            kir.EnQue("rowOutQue_y", "rowOut_y"))
    a, b, s = queue_overlap(kir.Func("Compute", (), body))
    assert (a, b, s) == (Fraction(2, 6), Fraction(3, 6), Fraction(3, 6))
    # a pass that runs row by row frees its input after the row loop: a = 1
    loop = kir.For("i", Lit(0), Lit(4), Lit(1), (_v("t0"), _v("t1")))
    a, b, s = queue_overlap(kir.Func("Compute", (), (kir.Alloc("rowOut_y", "rowOutQue_y", "T"), loop,
                                                     kir.Free("rowInQue_x", "rowIn_x"))))
    assert (a, b, s) == (1, 0, 0)


def _tiling(name: str, dims: dict, dtypes: dict, overlap="spec") -> dict:
    """The rows tiling of example spec `name` evaluated at `dims` / `dtypes` on ascend910b1, with the Kernel IR's
    overlap fractions or, given `overlap`, with those instead (the same program otherwise)."""
    from opgen.ir.dtypes import parse_dtype
    from opgen.platforms import PLATFORMS
    from opgen.registry import load_spec
    from opgen.tiling import rowfamily, rowkernel
    from opgen.tiling.emit import evaluate
    from opgen.tiling.pipeline import kernel_build

    spec = load_spec(str(EX / name))
    u = kernel_build(spec)
    prog = u.tiling.program
    if overlap != "spec":
        real = rowkernel.program
        try:   # the tiling rebuilt with other fractions
            rowkernel.program = lambda *a, **k: real(*a, **{**k, "overlap": overlap})
            rowfamily.program = rowkernel.program
            # on a copy: rows_tiling rebuilds the variants' classes in place, and kernel_build's unit is shared
            prog = rowfamily.rows_tiling(spec, copy.deepcopy(u.lowered), u.counts).program
        finally:
            rowkernel.program = rowfamily.program = real
    tl = evaluate(spec, prog, u.tiling.inputs, dims, {k: parse_dtype(v) for k, v in dtypes.items()},
                  PLATFORMS["ascend910b1"], {})
    return {**tl, "_counts": u.counts, "_variants": u.lowered.extra["variants"]}


def _by_hand(rows, cores, H, in_bytes, ins, out_bytes, outs, vinstrs, k, depth, a, b, s, fetch=False):
    """passCycles of rows.row_split written out: a pass of k rows on one of `cores` cores (ceil(rows / cores) rows a
    core), copies at 1/cores of the HBM bandwidth (9 / 8000 cycles a byte for the whole), a batched pass's compute
    = its lanes at 64 fp32 a cycle and vinstrs issues of 8 + a barrier of 16 cycles. `fetch` (one buffer): the next
    pass's copy-in issued by Compute after the fraction a, whatever its scalar waits after that."""
    ratio = Fraction(9, 8000)   # CLOCK / HBM
    assert ratio == Fraction(int(CLOCK), int(HBM))
    t_in = math.floor(k * (H * in_bytes + ins * BURST) * cores * ratio)
    t_out = math.floor(k * (H * out_bytes + outs * BURST) * cores * ratio)
    t_c = k * H * vinstrs // 64 + vinstrs * (ISSUE + BARRIER)
    passes = -(-(-(-rows // cores)) // k)
    fl = lambda x, f: x * f.numerator // f.denominator   # noqa: E731 - integer cycles, as the tiling
    if depth == 2:   # the next pass prefetched (rowsched.pass_loop): the slowest stage
        steady = max(t_c, t_in, t_out)
    else:
        steady = max(t_c, fl(t_c, a if fetch else max(a, s)) + t_in, fl(t_c, 1 - b) + t_out)
    return max(t_in + passes * steady + t_out, passes * (t_in + t_out))


def test_layer_norm_grad_takes_one_buffer_that_compute_fetches():
    """LayerNormGradV3 4096 x 1152 (T bf16, U fp32) on 48 cores: dy and x in (2 + 2 B an element), pd_x out (2 B);
    6 rows a pass with two buffers per row queue, 8 with one (tests/test_rows_quebufs.py counts the bytes). Its
    Compute frees x and dy early (a = 6/19 of its vector instructions), allocates pd_x late (b = 14/15) and last
    waits on the scalar unit late (s = 13/15): the fractions of its Kernel IR (queue_overlap follows every one of
    its paths). One buffer whose next copy-in Compute issues right after those frees (ComputeFetch) is priced
    max(t_c, a t_c + t_in, (1 - b) t_c + t_out) a pass; two buffers prefetched, max(t_c, t_in, t_out). Both prices
    by hand agree with the tiling's; one buffer is the lower by more than rows.ONE_BUFFER_MARGIN (fewer passes, each
    issuing as many instructions) and is taken. Without the fetch (the copy-in after Compute, s late) one buffer
    would be the dearer; with the buffers priced as held throughout (a = 1, b = 0) two are kept."""
    from opgen.kernel.rowsched import queue_overlap

    dims, dt = {"Bd": (4096,), "H": 1152}, {"T": "bfloat16", "U": "float32"}
    tl = _tiling("layer_norm_grad.py", dims, dt)
    c = tl["_counts"]
    assert c.batch and tuple(c.row_in) == (("T", 2),) and tuple(c.row_out) == (("T", 1),)
    (v,) = tl["_variants"]
    kc = v.kclass
    a, b, s = queue_overlap(next(m for m in kc.methods if m.name == "Compute"), kc.methods)
    assert (a, b, s) == (Fraction(6, 19), Fraction(14, 15), Fraction(13, 15))
    assert (tl["rowsFitTwoBufs"], tl["rowsFitOneBuf"], tl["blockDim"]) == (6, 8, 48)
    two = _by_hand(4096, 48, 1152, 4, 2, 2, 1, c.vinstrs, 6, 2, a, b, s)
    one = _by_hand(4096, 48, 1152, 4, 2, 2, 1, c.vinstrs, 8, 1, a, b, s, fetch=True)
    assert (tl["passCyclesTwoBufs"], tl["passCyclesOneBuf"]) == (two, one)
    assert one * 64 < two * 63 and tl["rowQueBufs"] == 1 and tl["rowsPerPass"] == 8
    assert _by_hand(4096, 48, 1152, 4, 2, 2, 1, c.vinstrs, 8, 1, a, b, s) > two   # the copy-in after Compute
    held = _tiling("layer_norm_grad.py", dims, dt, overlap=(Fraction(1), Fraction(0), s))
    assert held["passCyclesOneBuf"] == _by_hand(4096, 48, 1152, 4, 2, 2, 1, c.vinstrs, 8, 1, 1, 0, s, fetch=True)
    assert held["passCyclesOneBuf"] > held["passCyclesTwoBufs"] and held["rowQueBufs"] == 2
    assert held["rowsPerPass"] == 6


@pytest.mark.parametrize("name,dims,dtypes,higher", [
    ("rms_norm.py", {"Bd": (4096,), "H": 4096}, {"T": "bfloat16"}, True),
    ("dynamic_quant.py", {"Bd": (4096,), "H": 4096}, {"T": "float16"}, True),
    ("log_softmax.py", {"Bd": (4096,), "H": 4096}, {"T": "bfloat16"}, True),
])
def test_memory_bound_kernels_keep_two_buffers(name, dims, dtypes, higher):
    """RmsNorm 4096 x 4096 bf16, DynamicQuant 4096 x 4096 fp16 and LogSoftmaxV2 4096 x 4096 bf16 (the bench's rows):
    one buffer would fit one row more a pass, but its price is higher (two buffers prefetch the next pass; before
    the prefetch LogSoftmaxV2's one buffer was priced lower by less than 1/64, rows.ONE_BUFFER_MARGIN), so the
    tiling keeps two."""
    tl = _tiling(name, dims, dtypes)
    one, two = tl["passCyclesOneBuf"], tl["passCyclesTwoBufs"]
    assert tl["rowsFitOneBuf"] > tl["rowsFitTwoBufs"] >= 1
    assert (one >= two) == higher and one * 64 >= two * 63 and tl["rowQueBufs"] == 2, tl
