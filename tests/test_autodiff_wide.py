"""Derived gradients of activations on wide inputs (docs/design.md "Backward from forward": ties, masked zeros,
function-level rules), against torch autograd in float64 of torch's own functions (not the DSL's decomposition):
exact zeros, tiny values, the kinks, and |x| up to 100 where a decomposition's derivative overflows (exp), divides
0 / 0 (the compensated log1p) or meets inf / inf (sigmoid through exp), plus NaN / inf inputs where torch is finite.
The interpreter's exact mode (float64) and device mode (fp32 steps), and (slow tier) the emulated kernels of
GeluGrad and SoftplusGrad through `opgen check`."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.interp import interpret

torch = pytest.importorskip("torch")
F = torch.nn.functional

EX = Path(__file__).resolve().parent.parent / "examples" / "specs"

_WIDE = [0.0, -0.0, 1e-30, -1e-30, 1e-3, -1e-3, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 10.0, -10.0, 16.5, -16.5, 17.0,
         -17.0, 20.0, -20.0, 30.0, -30.0, 40.0, -40.0, 88.7, -88.7, 89.0, -89.0, 100.0, -100.0]
X = np.array(_WIDE + list(np.random.default_rng(9).normal(0, 4, 33)) + [np.inf, -np.inf, np.nan], np.float32)
ALPHA, SCALE, ISCALE = 2.5, 1.3, 0.9


def _softplus(b, x):
    return b.softplus(x)


def _celu(b, x):        # torch's definition: max(0, x) + min(0, alpha (exp(x / alpha) - 1))
    return b.maximum(x, 0.0) + b.minimum(ALPHA * (b.exp(x * (1.0 / ALPHA)) - 1.0), 0.0)


def _elu(b, x):         # aten elu(x, alpha, scale, input_scale)
    return b.where(x > 0.0, x * SCALE, (ALPHA * SCALE) * (b.exp(x * ISCALE) - 1.0))


def _mish(b, x):
    return x * b.tanh(b.softplus(x))


def _hardswish(b, x):
    return x * b.minimum(b.maximum(x + 3.0, 0.0), 6.0) * (1.0 / 6.0)


CASES = {
    "softplus": (_softplus, F.softplus),
    "celu": (_celu, lambda x: F.celu(x, alpha=ALPHA)),
    "elu": (_elu, lambda x: torch.ops.aten.elu(x, ALPHA, SCALE, ISCALE)),
    "mish": (_mish, F.mish),
    "silu": (lambda b, x: b.silu(x), F.silu),
    "sigmoid": (lambda b, x: b.sigmoid(x), torch.sigmoid),
    "tanh": (lambda b, x: b.tanh(x), torch.tanh),
    "gelu_erf": (lambda b, x: b.gelu(x), F.gelu),
    "gelu_tanh": (lambda b, x: b.gelu(x, approximate="tanh"), lambda x: F.gelu(x, approximate="tanh")),
    "hardswish": (_hardswish, F.hardswish),
}

# The kinks where the DSL's composition and torch's op pick different (sub)gradients: HardSwish at -3 and 3 is
# x min(max(x + 3, 0), 6) / 6, whose max / min ties split the adjoint half-half (torch.maximum's rule), giving the
# mean of the one-sided derivatives (-0.25 at -3, 1.25 at 3); torch's hardswish op takes 0 and 1 (its own rule).
# CELU at x = +-1e-30: alpha (exp(x / alpha) - 1) rounds to exactly 0 (no expm1; README), so min(., 0) ties and
# takes half: 1.5 and 0.5 where F.celu gives 1 -- the same as torch autograd of the same composition
# (torch.maximum / torch.minimum), which _celu_composed_in_torch checks. A rounding tie, not a kink.
KINKS = {"hardswish": {-3.0: (-0.25, 0.0), 3.0: (1.25, 1.0)},
         "celu": {1e-30: (1.5, 1.0), -1e-30: (0.5, 1.0)}}


def _derived(body):
    from opgen.dsl import A2, OpSpec, derive_grad, f32

    spec = OpSpec("Act", aclnn="aclnnAct", socs=(A2,))
    (n,) = spec.dims("N")
    spec.input("x", f32, [n])
    spec.output("y", f32, [n])
    spec.body_fn = lambda b, x: {"y": body(b, x)}
    spec._body_loc = spec.loc
    return derive_grad(spec.finish(), "ActGrad", aclnn="aclnnActGrad", wrt=["x"], grads={"y": "dy"},
                       names={"x": "dx"}).finish()


def _torch_grad(fn, x, dy):
    t = torch.tensor(x.astype(np.float64), requires_grad=True)
    fn(t).backward(torch.tensor(dy.astype(np.float64)))
    return t.grad.numpy()


@pytest.mark.parametrize("mode", ["exact", "device"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_derived_activation_grads_match_torch_on_wide_inputs(name, mode):
    """dx of the derived backward against torch autograd (float64) wherever torch is finite; exact mode to 1e-9
    relative plus 1e-14 (the cancellations of 1 - tanh(x)^2 and x s(1 - s) in float64), device mode (fp32 arithmetic, AscendC's tanh / erf steps) to 2e-6 of the gradient's scale (max |dx|
    over the inputs, which is 1.3 here) plus 1e-4 relative. The kinks of KINKS take their documented value."""
    body, ref = CASES[name]
    dy = np.where(np.arange(X.size) % 3 == 2, np.float32(-0.75), np.float32(1.0)).astype(np.float32)
    got = np.asarray(interpret(_derived(body), {"x": X, "dy": dy}, mode=mode)["dx"], np.float64)
    want = _torch_grad(ref, X, dy)
    for xv, (ours, theirs) in KINKS.get(name, {}).items():
        i = int(np.flatnonzero(X == xv)[0])
        assert want[i] == pytest.approx(theirs * dy[i], rel=1e-12), (name, xv, want[i])   # torch's, recorded
        assert got[i] == pytest.approx(ours * dy[i], rel=1e-6), (name, xv, got[i])
        want[i] = ours * dy[i]
    # NaN inputs are left out: torch's ops return a gradient picked by their branch order there (elu' = scale,
    # hardswish' = 1), the composition another (a max tie: half); neither is a derivative
    fin = np.isfinite(want) & ~np.isnan(X)
    assert np.isfinite(got[fin]).all(), (name, mode, X[fin][~np.isfinite(got[fin])])
    if mode == "exact":
        tol = 1e-9 * np.abs(want[fin]) + 1e-14    # 1 - tanh^2, 1 - s and x s' cancel to ~2^-52 x 50
        if name == "softplus":   # torch's softplus returns x above its threshold 20: gradient 1, not 1 - 2e-9
            tol = tol + 1e-8
    else:
        tol = 1e-4 * np.abs(want[fin]) + 2e-6
    err = np.abs(got[fin] - want[fin])
    assert np.all(err <= tol), (name, mode, X[fin][np.argmax(err - tol)], float(err.max()))


@pytest.mark.parametrize("mode", ["exact", "device"])
def test_exact_zero_values(mode):
    """The values at x = 0 and -0 the trial found wrong: softplus' = 1/2 (not 1), CELU' = 1 (not 2), and a relu
    written as maximum(x, 0) takes 1/2 at its tie (torch.maximum's rule; torch's relu op takes 0)."""
    x = np.array([0.0, -0.0], np.float32)
    dy = np.ones(2, np.float32)
    for body, want in ((_softplus, 0.5), (_celu, 1.0), (lambda b, x: b.maximum(x, 0.0), 0.5),
                       (lambda b, x: b.maximum(x, 0.0) + b.minimum(x, 0.0), 1.0)):
        got = interpret(_derived(body), {"x": x, "dy": dy}, mode=mode)["dx"]
        np.testing.assert_array_equal(got, [want, want])


def test_bundled_gelu_grad_finite_on_minus_100_to_100():
    """examples/specs/derived/gelu_grad.py (tanh form), both modes, x in [-100, 100] with exact zero: finite and
    torch's gelu(approximate="tanh") gradient."""
    from opgen.registry import load_spec

    spec = load_spec(str(EX / "derived" / "gelu_grad.py"))
    x = np.concatenate([np.linspace(-100, 100, 2001), [0.0, -0.0, -88.7, -20.0, -30.0]]).astype(np.float32)
    dy = np.ones_like(x)
    want = _torch_grad(lambda t: F.gelu(t, approximate="tanh"), x, dy)
    for mode, rtol, atol in (("exact", 1e-9, 1e-14), ("device", 1e-4, 2e-6)):
        got = np.asarray(interpret(spec, {"self": x, "grad_output": dy}, mode=mode)["grad_input"], np.float64)
        assert np.isfinite(got).all(), (mode, x[~np.isfinite(got)])
        assert np.all(np.abs(got - want) <= rtol * np.abs(want) + atol), mode


_SOFTPLUS = '''"""Softplus, beta 1."""
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("Softplus", aclnn="aclnnSoftplus", socs=(A2,))
Bd = spec.variadic("Bd", max_rank=8)
spec.input("x", f32, [Bd])
spec.output("y", f32, [Bd])
spec.package("ops-nn", "activation")


@spec.body
def _(b, x):
    return {"y": b.softplus(x)}
'''

_SOFTPLUS_GRAD = '''"""SoftplusGrad derived from softplus.py."""
from opgen.dsl import derive_grad

spec = derive_grad("softplus.py", "SoftplusGrad", aclnn="aclnnSoftplusBackward", wrt=["x"], grads={"y": "dy"},
                   names={"x": "dx"})
'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.parametrize("which", ["gelu", "softplus"])
def test_emulated_kernels_on_wide_inputs(which, tmp_path, derived_gen):
    """GeluGrad (bundled; checked in the run's tree of derived operators, tests/conftest.py derived_gen) and
    SoftplusGrad kernels emulated by `opgen check --inputs` on the wide inputs: PASS, and their outputs are torch's
    float64 gradients to 2e-6 of the scale plus 1e-4 relative (fp32 kernels)."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    xs = X[np.isfinite(X)]
    xs = np.concatenate([xs, np.linspace(-100, 100, 401, dtype=np.float32)]).astype(np.float32)
    dy = np.where(np.arange(xs.size) % 3 == 2, np.float32(-0.75), np.float32(1.0)).astype(np.float32)
    if which == "gelu":
        spec = EX / "derived" / "gelu_grad.py"
        inputs, out, ref = {"self": xs, "grad_output": dy}, "grad_input", lambda t: F.gelu(t, approximate="tanh")
        dtypes, gen = {"T": "float32"}, derived_gen
    else:
        (tmp_path / "softplus.py").write_text(_SOFTPLUS)
        spec = tmp_path / "softplus_grad.py"
        spec.write_text(_SOFTPLUS_GRAD)
        inputs, out, ref, dtypes, gen = {"x": xs, "dy": dy}, "dx", F.softplus, None, tmp_path / "gen"
        write_ops([str(spec)], gen)
    r = run_check(str(spec), inputs=inputs, dtypes=dtypes, gen_dir=gen, progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    got = np.asarray(r.arrays[out], np.float64)
    want = _torch_grad(ref, xs, dy)
    assert np.isfinite(got).all()
    assert np.all(np.abs(got - want) <= 1e-4 * np.abs(want) + 2e-6), float(np.abs(got - want).max())


def test_hardswish_kinks_are_in_the_subdifferential():
    """The kink values KINKS records lie between the one-sided derivatives (float64 difference quotients)."""
    f = lambda x: x * min(max(x + 3.0, 0.0), 6.0) / 6.0
    for xv, (ours, _) in KINKS["hardswish"].items():
        h = 1e-7
        left, right = (f(xv) - f(xv - h)) / h, (f(xv + h) - f(xv)) / h
        assert min(left, right) - 1e-6 <= ours <= max(left, right) + 1e-6
        assert ours == pytest.approx((left + right) / 2, abs=1e-6)
        assert math.isfinite(ours)


def test_celu_composed_in_torch_takes_the_same_rounding_ties():
    """torch autograd of CELU written as _celu writes it (torch.maximum / torch.minimum, exp(x / alpha) - 1) gives
    the KINKS values at +-1e-30 and 1 at 0: the tie rule is torch's."""
    z = torch.zeros((), dtype=torch.float64)
    for xv, (ours, _) in list(KINKS["celu"].items()) + [(0.0, (1.0, None))]:
        t = torch.tensor(xv, dtype=torch.float64, requires_grad=True)
        (torch.maximum(t, z) + torch.minimum(ALPHA * (torch.exp(t / ALPHA) - 1.0), z)).backward()
        assert float(t.grad) == ours, (xv, float(t.grad))
