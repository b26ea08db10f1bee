"""The DSL's math functions (Builder.tanh, erf, sigmoid, silu, gelu, softplus, pow / **, clamp, sign, relu) through
the interpreter, against torch in float64 (an independent implementation): device mode (fp32 compute) within a few
fp32 ulps — absolute where the function is below one ulp of its neighbourhood — and exact mode (float64) within
float64 rounding."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from opgen.errors import SpecError
from opgen.interp.run import interpret
from opgen.registry import load_spec

HEAD = """
from opgen.dsl import A2, A3, OpSpec, f32

spec = OpSpec("MathProbe", aclnn="aclnnMathProbe", socs=(A2, A3))
N = spec.dim("N")
spec.input("x", f32, [N])
spec.output("y", f32, [N])


@spec.body
def _(b, x):
    return {{"y": {expr}}}
"""

# name: (DSL expression of x, torch function of a float64 tensor, fp32 tolerance (rtol, atol))
CASES = {
    # AscendC's Tanh on A2 / A3 (clip, exp(2x), (t - 1) / (t + 1) in fp32): t - 1 cancels near 0, an absolute error
    # of about ulp(1) / 2; exactly +-1 past |x| = 8.8 (docs/reference/ascendc.md §1.9)
    "tanh": ("b.tanh(x)", torch.tanh, (2e-7, 1.8e-7)),
    # AscendC's Erf on A2 / A3 (clip to +-3.92, a rational P / Q in fp32): at most 4.3e-7 from erf, the largest
    # just inside the clip (docs/reference/ascendc.md §1.9)
    "erf": ("b.erf(x)", torch.erf, (4.5e-7, 1e-30)),
    "sigmoid": ("b.sigmoid(x)", torch.sigmoid, (4e-7, 1e-30)),
    "silu": ("b.silu(x)", F.silu, (4e-7, 1e-30)),
    # 0.5 x (1 + erf(x / sqrt 2)) cancels for x < 0: an absolute error of up to 0.5 |x| times erf's 4.3e-7, largest
    # just inside the clip (|x| = 3.92 sqrt 2: 1.2e-6 at most; seen 6.8e-7 on these inputs)
    "gelu": ("b.gelu(x)", F.gelu, (4.5e-7, 1.2e-6)),
    # exp of an argument ~ -k (x + 0.044715 x^3): its fp32 error grows with the argument (1e-6 relative at x = -5);
    # torch's own 0.5 x (1 + tanh(.)) flushes the far negative tail to -0 where this form keeps a tiny value
    "gelu_tanh": ('b.gelu(x, approximate="tanh")', lambda t: F.gelu(t, approximate="tanh"), (4e-6, 1e-10)),
    # softplus as float64 math (log(1 + e^(beta x)) / beta = logaddexp(0, beta x) / beta): torch's threshold
    # returns x itself past beta x > 20, a float64 difference of e^-20; relative also where it is tiny (x = -40:
    # 4e-18; log(1 + tiny) would round to 0 there), through log1p
    "softplus": ("b.softplus(x)", lambda t: torch.logaddexp(torch.zeros_like(t), t), (6e-7, 1e-30)),
    "softplus_beta2": ("b.softplus(x, beta=2.0)", lambda t: torch.logaddexp(torch.zeros_like(t), 2 * t) / 2,
                       (6e-7, 1e-30)),
    "log1p": ("b.log1p(b.abs(x) * 0.01 - 0.5)", lambda t: torch.log1p(t.abs() * 0.01 - 0.5), (4e-7, 1e-30)),
    "log1p_tiny": ("b.log1p(x * 1e-9)", lambda t: torch.log1p(t * 1e-9), (2e-7, 1e-30)),
    "pow2": ("x ** 2", lambda t: torch.pow(t, 2), (2.5e-7, 0)),
    "pow3": ("b.pow(x, 3)", lambda t: torch.pow(t, 3), (4e-7, 0)),
    "pow_m2": ("b.pow(x, -2)", lambda t: torch.pow(t, -2), (4e-7, 0)),
    # integer |p| > 4: binary exponentiation, exact in sign for x < 0 ((-2) ** 5 = -32; exp(p log x) gave NaN)
    "pow5": ("b.pow(x, 5)", lambda t: torch.pow(t, 5), (8e-7, 0)),
    "pow_m5": ("b.pow(x, -5)", lambda t: torch.pow(t, -5), (8e-7, 0)),
    "pow_half": ("b.pow(b.abs(x), 0.5)", lambda t: torch.pow(t.abs(), 0.5), (1.2e-7, 0)),
    "pow_1_7": ("b.pow(b.abs(x), 1.7)", lambda t: torch.pow(t.abs(), 1.7), (2e-6, 0)),
    "pow0": ("b.pow(x, 0)", lambda t: torch.pow(t, 0), (0, 0)),
    "clamp": ("b.clamp(x, min=-1.5, max=2.0)", lambda t: torch.clamp(t, -1.5, 2.0), (0, 0)),
    "clamp_lo": ("b.clamp(x, min=0.25)", lambda t: torch.clamp(t, min=0.25), (0, 0)),
    "sign": ("b.sign(x)", torch.sign, (0, 0)),
    "relu": ("b.relu(x)", torch.relu, (0, 0)),
}


def _inputs():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(3000) * 3, rng.uniform(-30, 30, 2000), [0.0, -0.0, 1e-6, -1e-6, 40.0,
                                                                                     -40.0, 88.0, -104.0]])
    return x.astype(np.float32)


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    d = tmp_path_factory.mktemp("math")
    out = {}
    for name, (expr, _f, _tol) in CASES.items():
        p = d / f"{name}.py"
        p.write_text(textwrap.dedent(HEAD.format(expr=expr)))
        out[name] = load_spec(str(p))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_device_and_exact_mode_against_torch(specs, name):
    """Device mode (fp32) within the case's tolerance of torch's float64 value of the same fp32 inputs; exact mode
    (float64) within 1e-12 relative (+1e-300 absolute) of it."""
    _expr, fn, (rtol, atol) = CASES[name]
    x = _inputs()
    want = fn(torch.from_numpy(x.astype(np.float64))).numpy()
    dev = interpret(specs[name], {"x": x}, mode="device")["y"]
    assert dev.dtype == np.float32
    np.testing.assert_allclose(dev.astype(np.float64), want, rtol=rtol, atol=atol, equal_nan=True)
    ex = interpret(specs[name], {"x": x}, mode="exact")["y"]
    assert ex.dtype == np.float64
    np.testing.assert_allclose(ex, want, rtol=1e-12, atol=1e-300 if atol == 0 else 1e-15, equal_nan=True)


def test_tanh_in_device_mode_saturates_like_ascendc_and_lowers(specs):
    """Past the clip (|x| >= 8.8) AscendC's formula gives exactly +-1, NaN stays NaN, and the rows family lowers tanh
    as the clip / exp / divide steps (no tanh op reaches the lowering)."""
    from opgen.kernel.rowmerge import prepare   # lazy: start-up time
    from opgen.passes.pipeline import optimize   # lazy: start-up time

    x = np.array([8.8, 9.0, 40.0, 1e30, -8.8, -88.0, np.inf, -np.inf, np.nan, 0.0], np.float32)
    y = interpret(specs["tanh"], {"x": x})["y"]
    assert list(y[:8]) == [1.0, 1.0, 1.0, 1.0, -1.0, -1.0, 1.0, -1.0] and np.isnan(y[8]) and y[9] == 0.0
    g = prepare(optimize(specs["tanh"].graph(specs["tanh"].keys()[0])))
    assert "tanh" not in {n.op for n in g.nodes} and {"exp", "div", "minimum", "maximum"} <= {n.op for n in g.nodes}


def test_lowerable_forms_use_only_rows_ops(specs):
    """sigmoid, silu, gelu(tanh), softplus, log1p, pow, clamp and relu are built from ops the rows family lowers (no
    new op): the elementwise ones, and the compare and select log1p uses (AscendC's Compare / Select); softplus,
    log1p and relu build a rows kernel."""
    from opgen.kernel.rows import ELEMENTWISE   # lazy: start-up time
    from opgen.tiling.pipeline import kernel_build   # lazy: start-up time

    ok = ELEMENTWISE | {"const", "cast", "broadcast", "eq", "select"}
    for name in ("softplus", "log1p", "relu"):
        assert kernel_build(specs[name]).family.name == "rows", name
    for name in ("sigmoid", "silu", "gelu_tanh", "softplus", "softplus_beta2", "log1p", "pow3", "pow_m2", "pow5", "pow_m5", "pow_1_7",
                 "clamp", "relu"):
        spec = specs[name]
        ops = {n.op for n in spec.graph(spec.keys()[0]).nodes}
        assert ops <= ok, (name, ops - ok)


def test_bad_arguments_are_one_line_spec_errors(tmp_path):
    """A tensor exponent, an unknown gelu form and a clamp without bounds: SpecError at the spec line."""
    for expr, words in (("b.pow(x, x)", "exponent must be a number"), ('b.gelu(x, approximate="fast")',
                        "approximate must be"), ("b.clamp(x)", "give min=, max= or both")):
        p = tmp_path / "bad.py"
        p.write_text(textwrap.dedent(HEAD.format(expr=expr)))
        spec = load_spec(str(p))
        with pytest.raises(SpecError, match=words) as e:
            spec.graph(spec.keys()[0])
        assert "bad.py:12" in str(e.value)


def test_a_dim_is_a_number_on_either_side_of_a_tensor(tmp_path):
    """README "Writing a spec": a dim is a number of the body in arithmetic with a tensor, written before it (N * x,
    N + x, N - x) as after it (x * N); against float64 NumPy. A dim floor-divided by a tensor stays a one-line
    SpecError with the dims hint."""
    p = tmp_path / "dim_left.py"
    p.write_text(textwrap.dedent(HEAD.format(expr="N * x + (N + x) - (N - x) * x + x / N")))
    x = _inputs()
    n = x.shape[0]
    x64 = x.astype(np.float64)
    got = interpret(load_spec(str(p)), {"x": x}, mode="exact")["y"]
    np.testing.assert_allclose(got, n * x64 + (n + x64) - (n - x64) * x64 + x64 / n, rtol=1e-12, atol=1e-300)
    p.write_text(textwrap.dedent(HEAD.format(expr="N // x")))
    spec = load_spec(str(p))
    with pytest.raises(SpecError, match="unsupported operand type.*a dim is an integer symbol") as e:
        spec.graph(spec.keys()[0])
    assert "dim_left.py:12" in str(e.value) and "\n" not in e.value.message
    from opgen.ir.dims import Sym
    for bad in ([2], "x", 2.5):   # not a tensor: a SpecError naming the operand, not a bare TypeError
        with pytest.raises(SpecError, match="not a dim"):
            Sym("N") * bad


def test_matmul_operator_is_the_builders_matmul(tmp_path):
    """`x @ w` in a body (a new user's first spelling of a matrix product; it was a TypeError) traces to
    b.matmul(x, w): the product against float64 NumPy, batch dims broadcast; `x @ 2.0` stays a one-line SpecError."""
    p = tmp_path / "at.py"
    p.write_text(textwrap.dedent("""
        from opgen.dsl import A2, OpSpec, f32

        spec = OpSpec("AtProbe", aclnn="aclnnAtProbe", socs=(A2,))
        B, M, K, N = spec.dims("B M K N")
        spec.input("x", f32, [B, M, K])
        spec.input("w", f32, [K, N])
        spec.output("y", f32, [B, M, N])


        @spec.body
        def _(b, x, w):
            return {"y": x @ w}
        """))
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((2, 3, 5)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    got = interpret(load_spec(str(p)), {"x": x, "w": w}, mode="exact")["y"]
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.astype(np.float64), rtol=1e-12)
    p.write_text(p.read_text().replace("x @ w", "x @ 2.0"))
    spec = load_spec(str(p))
    with pytest.raises(SpecError, match="unsupported operand type") as e:
        spec.graph(spec.keys()[0])
    assert "at.py:13" in str(e.value) and "\n" not in e.value.message


def test_softplus_takes_a_runtime_attribute(tmp_path):
    """b.softplus(x, beta) with beta a float attribute (a tensor, not a Python number) against float64 math."""
    p = tmp_path / "softplus_attr.py"
    p.write_text(textwrap.dedent("""
        from opgen.dsl import A2, A3, OpSpec, f32

        spec = OpSpec("SoftplusAttr", aclnn="aclnnSoftplusAttr", socs=(A2, A3))
        N = spec.dim("N")
        spec.input("x", f32, [N])
        spec.attr("beta", float, 1.0)
        spec.output("y", f32, [N])


        @spec.body
        def _(b, x, beta):
            return {"y": b.softplus(x, beta)}
        """))
    x = _inputs()
    want = np.logaddexp(0.0, 2.5 * x.astype(np.float64)) / 2.5
    got = interpret(load_spec(str(p)), {"x": x}, {"beta": 2.5}, mode="device")["y"]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=6e-7, atol=1.2e-7)


@pytest.mark.slow
def test_softplus_kernel_keeps_relative_accuracy_far_below_zero(specs, tmp_path):
    """The emitted softplus kernel (the rows family: exp, compare and select of log1p) in the emulation against float64
    logaddexp over [-40, 40]: a few fp32 ulps relative wherever the value is a normal fp32 number (log(1 + tiny)
    would give 0 for x < -16.6, a relative error of 1 that check's floored rule let pass)."""
    from opgen.check import run_check   # lazy: start-up time
    from opgen.codegen import write_ops   # lazy: start-up time

    spec = specs["softplus"]
    write_ops([spec.file], tmp_path / "gen")
    x = np.concatenate([np.linspace(-40.0, 40.0, 4001), [-87.0, -16.7, -16.5, 0.0]]).astype(np.float32)
    r = run_check(spec.file, {"x": x}, gen_dir=tmp_path / "gen", progress=False)
    assert r.passed and not r.faults, r.faults[:3]
    got = r.arrays["y"].astype(np.float64)
    want = np.logaddexp(0.0, x.astype(np.float64))
    normal = np.abs(want) > np.finfo(np.float32).tiny
    rel = np.abs(got[normal] - want[normal]) / want[normal]
    assert rel.max() < 1e-6, (rel.max(), x[normal][rel.argmax()])
