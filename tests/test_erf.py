"""erf as AscendC's Erf computes it on Atlas A2 / A3 (docs/reference/ascendc.md §1.9): the interpreter's device mode,
the rows family's rewrite into vector steps and the cube epilogue's, against an fp32 evaluation written here from the
documented coefficients and against math.erf. The emitted kernels (GeluV2, GeGluV3 with approximate = 0) are checked
against float64 GELU in tests/test_examples.py."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from opgen.interp import interpret, run_graph
from opgen.registry import load_spec

from test_dsl_math import HEAD   # the one-input probe spec

# The coefficients as docs/reference/ascendc.md §1.9 prints them (decimal text, rounded to fp32 here)
P = [np.float32(v) for v in ("29639.384698", "5063.7915060", "1393.8061484", "101.62808918", "7.5517016694",
                             "0.053443748819")]
Q = [np.float32(v) for v in ("26267.224157", "13243.365831", "3023.1248150", "398.56963806", "31.212858877")]
CLIP = np.float32("3.92")


def _ascendc_erf(x: np.ndarray) -> np.ndarray:
    """The documented steps, one fp32 element at a time (Mins, Maxs, Mul, Muls / Adds / Mul Horner steps, Div)."""
    out = np.empty_like(x)
    for i, v in enumerate(x):
        c = max(min(v, CLIP), -CLIP)          # NaN: min / max of NumPy scalars propagate it
        if np.isnan(v):
            c = v
        s = np.float32(c * c)
        p = np.float32(s * P[5])
        p = np.float32(p + P[4])
        for k in (3, 2, 1, 0):
            p = np.float32(np.float32(s * p) + P[k])
        p = np.float32(c * p)
        q = np.float32(s + Q[4])
        for k in (3, 2, 1, 0):
            q = np.float32(np.float32(s * q) + Q[k])
        out[i] = np.float32(p / q)
    return out


def _points() -> np.ndarray:
    rng = np.random.default_rng(11)
    edges = [0.0, -0.0, 1e-30, -1e-30, 1e-6, 3.91999, 3.92, 3.92001, -3.92, 4.0, -4.0, 30.0, -30.0, 1e30, np.inf,
             -np.inf, np.nan]
    return np.concatenate([rng.uniform(-5, 5, 3000), rng.standard_normal(1000) * 0.1, edges]).astype(np.float32)


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    p = tmp_path_factory.mktemp("erf") / "erf_probe.py"
    p.write_text(textwrap.dedent(HEAD.format(expr="b.erf(x)")))   # the one-input probe of tests/test_dsl_math
    return load_spec(str(p))


def test_device_mode_is_ascendc_erf_bit_for_bit(probe):
    """Device mode takes AscendC's fp32 steps exactly (equal bits, NaN stays NaN, ±inf clip to ±erf(3.92))."""
    x = _points()
    got = interpret(probe, {"x": x}, mode="device")["y"]
    want = _ascendc_erf(x)
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32)[~np.isnan(x)], want.view(np.uint32)[~np.isnan(x)])
    assert np.isnan(got[np.isnan(x)]).all()
    assert got[x == np.inf][0] == got[x == np.float32(3.92)][0] == -got[x == -np.inf][0]


def test_device_mode_within_documented_error_of_erf(probe):
    """Within 4.3e-7 (absolute and relative) of math.erf on a dense grid of [-6, 6] (docs/reference/ascendc.md §1.9);
    exact mode is math.erf."""
    x = np.linspace(-6, 6, 200001).astype(np.float32)
    want = np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))
    got = interpret(probe, {"x": x}, mode="device")["y"].astype(np.float64)
    assert np.max(np.abs(got - want)) <= 4.3e-7
    nz = want != 0
    assert np.max(np.abs(got - want)[nz] / np.abs(want[nz])) <= 4.3e-7
    assert np.array_equal(interpret(probe, {"x": x}, mode="exact")["y"], want)


def test_rows_rewrite_is_the_same_steps(probe):
    """The rows family's graph (kernel.rowmerge.prepare) holds no erf, only clip / Mul / Add / Div steps, and
    evaluates to the interpreter's device-mode erf bit for bit."""
    from opgen.kernel.rowmerge import prepare   # lazy: start-up time
    from opgen.passes.pipeline import optimize   # lazy: start-up time
    from opgen.tiling.pipeline import kernel_build   # lazy: start-up time

    key = probe.keys()[0]
    g = prepare(optimize(probe.graph(key)))
    ops = {n.op for n in g.nodes}
    assert "erf" not in ops and {"mul", "add", "div"} <= ops, ops
    x = _points()
    bound = probe.bind({"x": x})
    got = run_graph(g, bound, mode="device")["y"]
    want = interpret(probe, {"x": x}, mode="device")["y"]
    assert np.array_equal(got.view(np.uint32)[~np.isnan(x)], want.view(np.uint32)[~np.isnan(x)])
    assert kernel_build(probe).family.name == "rows"


def test_gelu_v2_and_matmul_exact_gelu_lower(tmp_path):
    """GeluV2 with approximate = 0 builds a rows kernel; a matmul + bias + exact GELU builds a cube kernel whose
    epilogue steps hold the Erf steps (no erf op)."""
    from pathlib import Path

    from opgen.kernel.cube import gemm_layout   # lazy: start-up time
    from opgen.tiling.pipeline import kernel_build   # lazy: start-up time

    ex = Path(__file__).resolve().parents[1] / "examples" / "specs"
    spec = load_spec(str(ex / "gelu_v2.py"))
    assert kernel_build(spec).family.name == "rows"
    src = (ex / "matmul_gelu.py").read_text().replace('approximate="tanh"', 'approximate="none"')
    assert 'approximate="none"' in src
    p = tmp_path / "matmul_gelu_erf.py"
    p.write_text(src)
    mm = load_spec(str(p))
    assert kernel_build(mm).family.name == "cube"
    from opgen.passes.pipeline import optimize   # lazy: start-up time

    lay = gemm_layout(optimize(mm.graph(mm.keys()[0])))
    ops = [s[2] for s in lay.steps if s[0] == "op"]
    assert "erf" not in ops and ops.count("div") >= 1 and ops.count("minimum") + ops.count("maximum") >= 2, ops


def test_a_half_operand_is_computed_in_fp32_and_rounded_back():
    """A float16 operand (not one a kernel sees: GELU casts to fp32 first) takes the same fp32 steps and is rounded
    to float16 once, as AscendC's Erf does for half; it never leaks float64 into device mode."""
    from opgen.interp.kernels import _erf

    x = _points()[:500].astype(np.float16)
    got = _erf(None, x, None, None)
    assert got.dtype == np.float16
    assert np.array_equal(got, _ascendc_erf(x.astype(np.float32)).astype(np.float16))
