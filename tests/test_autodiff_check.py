"""Derived backward kernels through the whole compiler: the derived RmsNormGrad (examples/specs/derived/) generated,
its kernel emulated by `opgen check`, its outputs compared with torch autograd of RmsNorm in float64 on the inputs
the kernel got, and its GM traffic against the minimum (at most 1.10x, the target for derived kernels). One build: the hand-written
kernel's traffic on the same cases was measured equal (README "Backward operators derived from the forward")."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.check import run_check

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")]

EX = Path(__file__).resolve().parent.parent / "examples" / "specs"


def test_derived_rms_norm_grad_kernel(derived_gen):
    torch = pytest.importorskip("torch")
    derived = EX / "derived" / "rms_norm_grad.py"
    dims = {"Bd": (1500,), "H": 64}   # rows enough that the per-core partial column sums are a small share
    r = run_check(str(derived), dims=dims, gen_dir=derived_gen, seed=3, progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    x = torch.tensor(np.asarray(r.inputs["x"], dtype=np.float64), requires_grad=True)
    g = torch.tensor(np.asarray(r.inputs["gamma"], dtype=np.float64), requires_grad=True)
    dy = torch.tensor(np.asarray(r.inputs["dy"], dtype=np.float64))
    h = x.shape[-1]
    # torch recomputes rstd from x; the kernel reads the fp32 rstd it was given: they differ by fp32 rounding (2^-24
    # relative), well inside the bound below
    (x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * g).backward(dy)
    for name, want in (("dx", x.grad.numpy()), ("dgamma", g.grad.numpy())):
        got = np.asarray(r.arrays[name], dtype=np.float64)
        terms = h if name == "dx" else 1500
        bound = (2.0**-24 * 8 * terms) * (np.abs(want) + np.abs(want).mean())
        assert np.all(np.abs(got - want) <= bound), (name, float(np.abs(got - want).max()))
    assert r.gm_bytes <= 1.10 * r.gm_bytes_min, (r.gm_bytes, r.gm_bytes_min)


@pytest.fixture(scope="module")
def softmax_grad_tree(derived_gen):
    """(spec path, generated tree) of the derived SoftmaxGrad: the run's tree of derived operators
    (tests/conftest.py derived_gen)."""
    return EX / "derived" / "softmax_grad.py", derived_gen


@pytest.mark.parametrize("dims, strategy", [
    ({"Bd": (5, 3), "H": 77}, 1),
    # the row sum of dy y exchanged through workspace (rows split over the cores)
    ({"Bd": (2,), "H": 20000}, 2),
])
def test_derived_softmax_grad_kernel(dims, strategy, softmax_grad_tree):
    """The derived SoftmaxGrad (y saved: dx = y (dy - sum(dy y)), aclnnSoftmaxBackward's inputs) against torch
    autograd of softmax in float64, y given as softmax(x) in fp32: rows per core pass (ROW_SPLIT) and rows split
    over the cores (COL_SPLIT). Both cases check one generated package (one build)."""
    torch = pytest.importorskip("torch")
    derived, out = softmax_grad_tree
    rng = np.random.default_rng(5)
    shape = (*dims["Bd"], dims["H"])
    x = rng.normal(0.0, 3.0, shape)
    e = np.exp(x - x.max(-1, keepdims=True))
    y = (e / e.sum(-1, keepdims=True)).astype(np.float32)
    dy = rng.normal(0.0, 1.0, shape).astype(np.float32)
    r = run_check(str(derived), {"dy": dy, "y": y}, dtypes={"T": "float32"}, gen_dir=out, progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items()
                                                      if not c.passed})
    assert r.tiling_key % 10 == strategy, r.tiling_key
    xt = torch.tensor(x, requires_grad=True)
    torch.softmax(xt, -1).backward(torch.tensor(dy, dtype=torch.float64))
    want = xt.grad.numpy()
    got = np.asarray(r.arrays["dx"], dtype=np.float64)
    # y is softmax(x) rounded to fp32 (2^-24 relative), then fp32 arithmetic with a row sum of H terms
    scale = y * (np.abs(dy) + np.abs(want).mean())   # dx = y (dy - <dy, y>)
    assert np.all(np.abs(got - want) <= 2.0**-24 * 16 * dims["H"] * (scale + scale.mean())), \
        float(np.abs(got - want).max())


def test_derived_cross_entropy_grad_kernel_reads_log_prob(derived_gen, examples_gen):
    """The derived CrossEntropyLossGrad (examples/specs/derived/, log_prob saved) emulated against torch autograd of
    cross_entropy in float64 (weights, label smoothing, an ignored row, a tail over the cores), and its GM traffic
    within 5% of the hand-written CrossEntropyLossGrad's on the same case (the target for derived kernels)."""
    torch = pytest.importorskip("torch")
    derived, hand = EX / "derived" / "cross_entropy_loss_grad.py", EX / "cross_entropy_loss_grad.py"
    n, c, eps = 97, 301, 0.1
    rng = np.random.default_rng(8)
    x = rng.normal(0.0, 2.0, (n, c))
    t = rng.integers(0, c, n).astype(np.int64)
    t[5] = -100
    w = rng.uniform(0.5, 2.0, c).astype(np.float32)
    g = rng.normal(0.0, 1.0, n).astype(np.float32)
    z = x - x.max(-1, keepdims=True)
    lp = (z - np.log(np.exp(z).sum(-1, keepdims=True))).astype(np.float32)
    inputs = {"gradLoss": g, "target": t, "weight": w, "log_prob": lp}
    r = run_check(str(derived), inputs, attrs={"label_smoothing": eps}, dtypes={"T": "float32"}, gen_dir=derived_gen, progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: v.to_json() for k, v in r.outputs.items()})
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    torch.nn.functional.cross_entropy(xt, torch.tensor(t), weight=torch.tensor(w, dtype=torch.float64),
                                      reduction="none", ignore_index=-100, label_smoothing=eps).backward(
        torch.tensor(g, dtype=torch.float64))
    want = xt.grad.numpy()
    got = np.asarray(r.arrays["xGrad"], dtype=np.float64)
    # the kernel reads log_prob rounded to fp32 (exp of it: 2^-24 relative) and sums C terms in fp32
    scale = np.abs(g)[:, None] * 2.0 * w.max()
    assert np.all(np.abs(got - want) <= 2.0**-24 * 8 * c * scale), float(np.abs(got - want).max())
    inputs["logProb"] = inputs.pop("log_prob")   # the hand-written grad keeps its own names
    h = run_check(str(hand), inputs, attrs={"labelSmoothing": eps}, dtypes={"T": "float32"}, gen_dir=examples_gen, progress=False)
    assert h.passed and r.gm_bytes <= 1.05 * h.gm_bytes, (r.gm_bytes, h.gm_bytes)


@pytest.fixture(scope="module")
def derived_tree(derived_gen):
    """The derived LayerNormGrad, SwiGluGrad and GeluGrad: the run's tree of derived operators (tests/conftest.py
    derived_gen; one build each, shared with the other tests that check them)."""
    return derived_gen


def _torch_case(r, names):
    import torch

    return {n: torch.tensor(np.asarray(r.inputs[n], dtype=np.float64), requires_grad=True) for n in names}


@pytest.mark.parametrize("op, dims, dtypes", [
    ("layer_norm_grad", {"Bd": (3, 500), "H": 64}, {"T": "float32", "U": "float32"}),   # rows enough that the
    # per-core partial column sums (pd_gamma, pd_beta) are a small share of the traffic
    ("swiglu_grad", {"Bd": (53,), "H": 97}, {"T": "float32"}),
    ("gelu_grad", {"Bd": (7, 301)}, {"T": "float32"}),
])
def test_derived_kernels_against_torch_autograd(op, dims, dtypes, derived_tree):
    """The derived LayerNormGrad (weight and bias), SwiGluGrad and GeluGrad kernels emulated against torch autograd of
    their forwards in float64 on the inputs the kernel got (rows with a tail over the cores), and their GM traffic at
    most 1.10x the minimum."""
    torch = pytest.importorskip("torch")
    r = run_check(str(EX / "derived" / f"{op}.py"), dims=dims, dtypes=dtypes, gen_dir=derived_tree, seed=9,
                  progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    f64 = {k: np.asarray(v, dtype=np.float64) for k, v in r.inputs.items() if v is not None}
    if op == "layer_norm_grad":
        t = _torch_case(r, ["x", "gamma"])   # beta: no gradient reads it, so the derived operator does not take it
        h = f64["x"].shape[-1]
        t["beta"] = torch.zeros(h, dtype=torch.float64, requires_grad=True)
        torch.nn.functional.layer_norm(t["x"], (h,), t["gamma"], t["beta"], 1e-5).backward(torch.tensor(f64["dy"]))
        want = {"pd_x": t["x"].grad, "pd_gamma": t["gamma"].grad, "pd_beta": t["beta"].grad}
        rows = f64["x"].size // h
        terms = {"pd_x": h, "pd_gamma": rows, "pd_beta": rows}   # pd_x: row sums; pd_gamma / pd_beta: column sums
    elif op == "swiglu_grad":
        t = _torch_case(r, ["x"])
        a, g = t["x"].chunk(2, -1)
        (torch.nn.functional.silu(a) * g).backward(torch.tensor(f64["dy"]))
        want, terms = {"dx": t["x"].grad}, {"dx": 1}
    else:
        t = _torch_case(r, ["self"])
        torch.nn.functional.gelu(t["self"], approximate="tanh").backward(torch.tensor(f64["grad_output"]))
        want, terms = {"grad_input": t["self"].grad}, {"grad_input": 1}
    for name, w in want.items():
        w = w.numpy()
        got = np.asarray(r.arrays[name], dtype=np.float64)
        # fp32 arithmetic: a few units of 2^-24 of the terms' size per summed term (the saved mean / rstd are fp32)
        bound = 2.0**-24 * 16 * max(terms[name], 8) * (np.abs(w) + np.abs(w).mean())
        assert np.all(np.abs(got - w) <= bound), (name, float(np.abs(got - w).max()))
    assert r.gm_bytes <= 1.10 * r.gm_bytes_min, (r.gm_bytes, r.gm_bytes_min)


_FAST_GELU = '''"""FastGelu (tests only): y = x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|))."""
from opgen.dsl import A2, A3, OpSpec, f32

spec = OpSpec("FastGelu", aclnn="aclnnFastGelu", socs=(A2, A3), round="rint", doc="FastGelu.")
Bd = spec.variadic("Bd", max_rank=8)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [Bd])
spec.output("y", T, [Bd])
spec.dtypes((T,), [(f32,)])


@spec.body
def _(b, x):
    a = b.abs(x)
    return {"y": x / (1.0 + b.exp(-1.702 * a)) * b.exp(0.851 * (x - a))}
'''


def test_derived_fast_gelu_grad_reuses_the_forward_exp(tmp_path):
    """FastGeluGrad derived from FastGelu: its sigmoid factor 1 / (1 + exp(1.702 |x|)) is taken from the forward's
    exp(-1.702 |x|) (rowalg.sigmoid_from_exp; -1.702 |x| <= 0 is proven) and its negations folded (fold_negation):
    32 -> 28 vector instructions a row. The emulated kernel against torch autograd of FastGelu in float64, on inputs
    up to |x| = 60 (exp(1.702 |x|) past fp32's range: the replaced form's own overflow), within the few fp32
    roundings a term makes (the interpreter's check passes too)."""
    torch = pytest.importorskip("torch")
    from opgen.kernel import rowalg
    from opgen.tiling.pipeline import compile_unit
    from opgen.registry import load_spec

    (tmp_path / "fast_gelu.py").write_text(_FAST_GELU)
    grad = tmp_path / "fast_gelu_grad.py"
    grad.write_text('from opgen.dsl import derive_grad\n\nspec = derive_grad("fast_gelu.py", "FastGeluGrad", aclnn="aclnnFastGeluBackward", '
                    'wrt=["x"], grads={"y": "dy"}, names={"x": "dx"})\n')
    u = compile_unit(load_spec(str(grad)), until="lower", only_key0=True)
    p = u.lowered.programs[u.key0]
    assert rowalg.vector_instrs_per_row(p) == 28
    assert sum(1 for i in p.instrs if i.op == "Exp") == 2
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((37, 129)) * 3).astype(np.float32)
    x.flat[:8] = [0.0, -0.0, 60.0, -60.0, 1e-30, -1e-30, 20.0, -20.0]
    dy = rng.standard_normal(x.shape).astype(np.float32)
    from opgen.codegen import write_ops

    write_ops([str(grad)], tmp_path / "gen", jobs=1)
    r = run_check(str(grad), {"dy": dy, "x": x}, dtypes={"T": "float32"}, gen_dir=tmp_path / "gen", progress=False)
    assert not r.faults and r.passed, (r.faults[:3], {k: c.to_json() for k, c in r.outputs.items() if not c.passed})
    t = torch.tensor(x.astype(np.float64), requires_grad=True)
    a = t.abs()
    (t / (1 + torch.exp(-1.702 * a)) * torch.exp(0.851 * (t - a))).backward(torch.tensor(dy.astype(np.float64)))
    want = t.grad.numpy()
    got = np.asarray(r.arrays["dx"], dtype=np.float64)
    # fp32: each of the three terms of dx carries a few roundings of its size (|dy| (1 + 1.702 |x|) bounds them)
    bound = 2.0**-24 * 64 * np.abs(dy) * (1 + 1.702 * np.abs(x))
    assert np.all(np.abs(got - want) <= bound), float(np.max(np.abs(got - want) / (np.abs(dy) * (1 + np.abs(x)))))
