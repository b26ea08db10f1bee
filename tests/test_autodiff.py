"""derive_grad (opgen.dsl.grad) and the reverse-mode rules (opgen.ir.autodiff): derived backward specs interpreted
in float64 against torch autograd of the forward (written here in torch, independently of the spec), the derived
AdaLayerNormGrad against the hand-written one, the rules one op at a time, and the errors of bad arguments."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from opgen.errors import SpecError
from opgen.interp import interpret
from opgen.registry import load_spec

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
RNG = np.random.default_rng(25)


def _t(a, grad=False):
    return torch.tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64, requires_grad=grad)


def _autograd(fn, inputs: dict, wrt, dy):
    """{name: d sum(fn(**inputs) * dy) / d name} by torch autograd in float64."""
    ts = {k: _t(v, k in wrt) for k, v in inputs.items()}
    out = fn(**ts)
    out.backward(_t(dy))
    return {k: ts[k].grad.numpy() for k in wrt}


def _close(got, want, saved=False):
    """float64 agreement; `saved`: the inputs include fp32 statistics (rstd, mean: an input declared f32 is
    rounded to fp32 when bound), which perturb the result by a few units of fp32 rounding (2^-24)."""
    rtol, atol = (1e-10, 1e-12) if not saved else (2e-6, 2e-6 * float(np.abs(want).max(initial=1.0)))
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=rtol, atol=atol)


def _f32(a):
    return np.asarray(a, dtype=np.float32)


@pytest.mark.parametrize("shape", [(3, 8), (2, 3, 5), (1, 1)])
def test_rms_norm_grad_against_autograd(shape):
    x, gamma, dy = _f32(RNG.normal(size=shape)), _f32(RNG.normal(size=shape[-1:])), _f32(RNG.normal(size=shape))
    eps = 1e-6

    def fwd(x, gamma):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * gamma

    want = _autograd(fwd, {"x": x, "gamma": gamma}, ["x", "gamma"], dy)
    rstd = 1.0 / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps)
    got = interpret(str(EX / "rms_norm_grad_derived.py"), {"dy": dy, "x": x, "gamma": gamma, "rstd": rstd},
                    mode="exact")
    _close(got["dx"], want["x"], saved=True)
    _close(got["dgamma"], want["gamma"], saved=True)


def test_rms_norm_grad_reuses_saved_rstd():
    """The derived graph reads the saved rstd and never recomputes it (no rsqrt, no epsilon)."""
    spec = load_spec(str(EX / "rms_norm_grad_derived.py"))
    assert [i.name for i in spec.inputs] == ["dy", "x", "gamma", "rstd"]
    assert [o.name for o in spec.outputs] == ["dx", "dgamma"]
    assert not spec.attrs
    g = spec.graph(spec.keys()[0])
    assert not any(n.op in ("rsqrt", "sqrt") for n in g.nodes)
    assert any("rstd" in n.inputs for n in g.nodes)


@pytest.mark.parametrize("shape", [(4, 7), (2, 2, 3)])
def test_softmax_grad_against_autograd(shape):
    x, dy = _f32(RNG.normal(size=shape) * 3), _f32(RNG.normal(size=shape))
    want = _autograd(lambda x: torch.softmax(x, -1), {"x": x}, ["x"], dy)
    got = interpret(str(EX / "softmax_grad_derived.py"), {"dy": dy, "x": x}, mode="exact")
    _close(got["dx"], want["x"])


@pytest.mark.parametrize("shape", [(3, 6), (2, 2, 5)])
def test_layer_norm_grad_against_autograd(shape):
    h = shape[-1]
    x, dy = _f32(RNG.normal(size=shape)), _f32(RNG.normal(size=shape))
    gamma, beta = _f32(RNG.normal(size=h)), _f32(RNG.normal(size=h))
    eps = 1e-5

    def fwd(x, gamma, beta):
        return torch.nn.functional.layer_norm(x, (h,), gamma, beta, eps)

    want = _autograd(fwd, {"x": x, "gamma": gamma, "beta": beta}, ["x", "gamma", "beta"], dy)
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x64 - mean) ** 2).mean(-1, keepdims=True) + eps)
    got = interpret(str(EX / "layer_norm_grad_derived.py"),
                    {"dy": dy, "x": x, "gamma": gamma, "mean": mean, "rstd": rstd}, mode="exact")
    _close(got["pd_x"], want["x"], saved=True)
    _close(got["pd_gamma"], want["gamma"], saved=True)
    _close(got["pd_beta"], want["beta"], saved=True)


@pytest.mark.parametrize("shape", [(3, 8), (2, 2, 2)])
def test_swiglu_grad_against_autograd(shape):
    x, dy = _f32(RNG.normal(size=shape)), _f32(RNG.normal(size=shape[:-1] + (shape[-1] // 2,)))

    def fwd(x):
        a, g = x.chunk(2, -1)
        return torch.nn.functional.silu(a) * g

    want = _autograd(fwd, {"x": x}, ["x"], dy)
    got = interpret(str(EX / "swiglu_grad_derived.py"), {"dy": dy, "x": x}, mode="exact")
    _close(got["dx"], want["x"])


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4), ()])
def test_gelu_grad_against_autograd(shape):
    x, dy = _f32(RNG.normal(size=shape) * 2), _f32(RNG.normal(size=shape))
    want = _autograd(lambda x: torch.nn.functional.gelu(x, approximate="tanh"), {"x": x}, ["x"], dy)
    got = interpret(str(EX / "gelu_grad_derived.py"), {"grad_output": dy, "self": x}, mode="exact")
    _close(got["grad_input"], want["x"])


# AdaLayerNormGrad: derived from AdaLayerNormV2 vs the hand-written spec, and vs torch autograd ------------------

ADA = [(sf, w, bias) for sf in ("row", "bcast") for w in (True, False) for bias in (True, False)]


@pytest.mark.parametrize("form,weight,bias", ADA)
def test_ada_layer_norm_grad_derived_equals_hand_written(form, weight, bias):
    bd, s, h = (2,), 3, 8
    x, dy = _f32(RNG.normal(size=bd + (s, h))), _f32(RNG.normal(size=bd + (s, h)))
    sshape = bd + (h,) if form == "row" else bd + (1, h)
    scale = _f32(RNG.normal(size=sshape))
    gamma = _f32(RNG.normal(size=h)) if weight else None
    beta = _f32(RNG.normal(size=h)) if bias else None
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x64 - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    hand = interpret(str(ROOT / "specs" / "ada_layer_norm_grad.py"),
                     {"dy": dy, "x": x, "rstd": rstd, "mean": mean, "scale": scale, "gamma": gamma, "beta": beta},
                     mode="exact")
    shift = _f32(np.zeros(sshape))
    got = interpret(str(EX / "ada_layer_norm_grad_derived.py"),
                    {"dy": dy, "x": x, "scale": scale, "shift": shift, "weight": gamma, "bias": beta, "mean": mean,
                     "rstd": rstd}, mode="exact")

    def fwd(x, scale, shift, weight=None, bias=None):
        y = torch.nn.functional.layer_norm(x, (h,), weight, bias, 1e-5)
        sc = scale.reshape(bd + (1, h)) if form == "row" else scale
        sh = shift.reshape(bd + (1, h)) if form == "row" else shift
        return y * (1 + sc) + sh

    ins = {"x": x, "scale": scale, "shift": shift}
    wrt = ["x", "scale", "shift"]
    if weight:
        ins["weight"], wrt = gamma, wrt + ["weight"]
    if bias:
        ins["bias"], wrt = beta, wrt + ["bias"]
    want = _autograd(fwd, ins, wrt, dy)
    pairs = [("pd_x", "x"), ("pd_scale", "scale"), ("pd_shift", "shift")]
    pairs += [("pd_gamma", "weight")] if weight else []
    pairs += [("pd_beta", "bias")] if bias else []
    for out, name in pairs:
        _close(got[out], want[name], saved=True)
        if out in hand:   # the hand-written formula assumes mean(z) = 0 and mean(z^2) = 1, which fp32 statistics
            _close(got[out], np.asarray(hand[out], dtype=np.float64), saved=True)   # meet to fp32 rounding
