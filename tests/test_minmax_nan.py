"""Max and Min on NaN and signed zeros (docs/reference/ascendc.md §1.13): the interpreter, the instruction table's
meanings and the emulation follow asc-devkit's boundary-value tables of the Memory vector APIs. Expected values
are the tables' rows, written out by hand; tests/test_isa.py runs the same lanes through the emulated C++."""
from __future__ import annotations

import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.check.compare import compare_output
from opgen.interp.minmax import ieee_max, ieee_min, reduce_max, reduce_min

ROOT = Path(__file__).resolve().parents[1]
NAN, INF = float("nan"), float("inf")

# (src0, src1, Max, Min): rows of the Max / Min tables (INF/NAN mode)
TABLE = [
    (-65504.0, NAN, NAN, NAN),
    (NAN, 1.0, NAN, NAN),
    (1.0, NAN, NAN, NAN),
    (NAN, INF, NAN, NAN),
    (0.0, -0.0, 0.0, -0.0),
    (-0.0, 0.0, 0.0, -0.0),
    (-0.0, -0.0, -0.0, -0.0),
    (0.0, -INF, 0.0, -INF),
    (INF, -INF, INF, -INF),
    (65504.0, INF, INF, 65504.0),
]


def _same(got, want) -> bool:
    """Equal as the tables read: NaN matches NaN, and zeros must agree in sign."""
    got, want = float(got), float(want)
    if np.isnan(want):
        return bool(np.isnan(got))
    return got == want and np.signbit(got) == np.signbit(want)


@pytest.mark.parametrize("dt", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64], ids=str)
def test_max_and_min_follow_the_boundary_tables(dt):
    a = np.array([r[0] for r in TABLE], dtype=np.float32).astype(dt)
    b = np.array([r[1] for r in TABLE], dtype=np.float32).astype(dt)
    mx, mn = ieee_max(a, b), ieee_min(a, b)
    assert mx.dtype == a.dtype and mn.dtype == a.dtype
    for k, (x, y, want_max, want_min) in enumerate(TABLE):
        want_max, want_min = float(np.float32(want_max).astype(dt)), float(np.float32(want_min).astype(dt))
        assert _same(mx[k], want_max), (x, y, mx[k])
        assert _same(mn[k], want_min), (x, y, mn[k])


def test_reductions_follow_the_reduce_tables():
    rows = np.array([[1.0, NAN, 3.0], [INF, -INF, 1.0], [-0.0, -0.0, -0.0], [-0.0, 0.0, -0.0], [1.0, 1.0, -INF]],
                    dtype=np.float32)
    mx, mn = reduce_max(rows, axis=1), reduce_min(rows, axis=1)
    for got, want in zip(mx, [NAN, INF, -0.0, 0.0, 1.0]):
        assert _same(got, want)
    for got, want in zip(mn, [NAN, -INF, -0.0, -0.0, -INF]):
        assert _same(got, want)
    assert reduce_max(rows, axis=1, keepdims=True).shape == (5, 1)


def test_the_interpreter_propagates_nan_through_maximum_minimum_and_max(tmp_path):
    from opgen.interp import interpret

    p = tmp_path / "clip_max.py"
    p.write_text('''
from opgen.dsl import A2, OpSpec, f32
spec = OpSpec("ClipRowMax", aclnn="aclnnClipRowMax", socs=(A2,))
N = spec.dim("N")
H = spec.dim("H")
spec.input("x", f32, [N, H])
spec.output("y", f32, [N, H])
spec.output("m", f32, [N])
spec.dtypes((), [()])
@spec.body
def _(b, x):
    return {"y": b.maximum(b.minimum(x, 1.0), -1.0), "m": x.max(-1, keepdims=False)}
''')
    x = np.array([[NAN, 0.5, 2.0], [-0.0, 0.0, -3.0]], dtype=np.float32)
    out = interpret(str(p), {"x": x})
    y, m = out["y"], out["m"]
    assert np.isnan(y[0, 0]) and y[0, 1] == 0.5 and y[0, 2] == 1.0 and y[1, 2] == -1.0
    assert np.isnan(m[0]) and _same(m[1], 0.0)


def test_a_kernel_that_drops_the_goldens_nans_is_told_how_many_and_where():
    g = np.array([NAN, 1.0, NAN, INF, 2.0], dtype=np.float64)
    kernel = np.array([0.0, 1.0, NAN, 7.0, 2.0], dtype=np.float32)
    c = compare_output("y", kernel, g, g.astype(np.float32), "float32")
    assert not c.passed
    assert c.reason.startswith("misses 2 of the golden's 3 non-finite elements (of 5): 1 where the golden is NaN "
                               "and 1 where it is ±inf; e.g. golden nan, kernel 0"), c.reason


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_an_emulated_clamp_keeps_nan_lanes(examples_gen):
    """HardSigmoid clamps with Maxs / Mins: NaN inputs stay NaN in the emulated kernel as in the golden (the C form
    `a > b ? a : b` gave 0 there), and the check passes with the NaNs counted."""
    from opgen.check.run import run_check

    spec = str(ROOT / "examples" / "specs" / "hard_sigmoid.py")
    x = np.linspace(-6, 6, 3 * 41, dtype=np.float32).reshape(3, 41)
    x[0, :5] = NAN
    r = run_check(spec, {"input_x": x}, {}, {"T": "float32"}, progress=False, gen_dir=examples_gen)
    c = r.outputs["output_y"]
    assert r.passed and c.golden_nonfinite == 5, c.to_json()
    assert np.isnan(r.arrays["output_y"][0, :5]).all()
