"""Inputs holding one value (0-d or [1]: a loss gradient's dout, a per-tensor quantisation scale / offset) in the rows
family: read once per core by the scalar unit in Init into a float member (opgen.kernel.rows `_load_one`,
RowProgram.gm_scalars) and used as the scalar operand of Muls / Adds. Written from a new user's specs
(SoftMarginLossGrad and RmsNormQuant of ops-nn, refused before: 'input dout is a 0-d tensor; pass it as an
attribute'). Values against float64 NumPy written here: the Kernel IR engine (fast) and the emulated kernels (slow)."""

from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

from opgen.check import run_check
from opgen.registry import load_spec

SMLG = '''
from opgen.dsl import A2, A3, OpSpec, Prod, bf16, f16, f32

spec = OpSpec("SoftMarginLossGrad", aclnn="aclnnSoftMarginLossBackward", socs=(A2, A3), round="rint")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")
spec.attr("reduction", int, 1, choices=(0, 1, 2), static=True)
spec.input("predict", T, [Bd, H])
spec.input("label", T, [Bd, H])
spec.input("dout", T, {0: [Bd, H], 1: [1], 2: [1]}, form_by="reduction")
spec.output("gradient", T, [Bd, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, predict, label, dout, reduction):
    g = -label * b.sigmoid(-label * predict) * dout
    if reduction == 1:
        g = g / (Prod("Bd") * H)
    return {"gradient": g}
'''

RNQ = '''
from opgen.dsl import A2, A3, OpSpec, bf16, f16, i8

spec = OpSpec("RmsNormQuant", aclnn="aclnnRmsNormQuant", socs=(A2, A3), round="rint")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=16384)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [Bd, H])
spec.input("gamma", T, [H])
spec.input("beta", T, [H])
spec.input("scale", T, [1])
spec.input("offset", i8, [1])
spec.attr("epsilon", float, 0.1)
spec.output("y", i8, [Bd, H])
spec.dtypes((T,), [(f16,), (bf16,)])


@spec.body
def _(b, x, gamma, beta, scale, offset, epsilon):
    q = x * b.rsqrt((x * x).mean(-1) + epsilon) * gamma + beta
    return {"y": b.quantize(q / scale, i8, "rint", offset=offset.f32())}
'''

BCE = '''
from opgen.dsl import A2, A3, OpSpec, Prod, bf16, f16, f32

spec = OpSpec("BinaryCrossEntropy", aclnn="aclnnBinaryCrossEntropy", socs=(A2, A3), round="rint")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")
spec.attr("reduction", int, 1, choices=(0, 1, 2), static=True)
spec.input("x", T, [Bd, H])
spec.input("y", T, [Bd, H])
spec.output("output", T, {0: [Bd, H], 1: [], 2: []}, form_by="reduction")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x, y, reduction):
    loss = -(y * b.maximum(b.log(x), -100.0) + (1.0 - y) * b.maximum(b.log(1.0 - x), -100.0))
    if reduction == 0:
        return {"output": loss}
    flat = loss.reshape([Prod("Bd"), H])
    return {"output": flat.mean([0, 1], keepdims=False) if reduction == 1 else flat.sum([0, 1], keepdims=False)}
'''

BCE_GRAD = '''
from opgen.dsl import derive_grad

spec = derive_grad("bce.py", "BinaryCrossEntropyGrad", aclnn="aclnnBinaryCrossEntropyBackward", wrt=["x"],
                   grads={"output": "grad_output"}, names={"x": "dx"})
'''

SML = '''
from opgen.dsl import A2, A3, OpSpec, Prod, bf16, f16, f32

spec = OpSpec("SoftMarginLoss", aclnn="aclnnSoftMarginLoss", socs=(A2, A3), round="rint")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")
spec.attr("reduction", str, "mean", choices=("none", "mean", "sum"), static=True)
spec.input("self", T, [Bd, H])
spec.input("target", T, [Bd, H])
spec.output("out", T, {"none": [Bd, H], "mean": [], "sum": []}, form_by="reduction")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, self, target, reduction):
    loss = b.softplus(-(target * self), 1.0)
    if reduction == "none":
        return {"out": loss}
    flat = loss.reshape([Prod("Bd"), H])
    return {"out": flat.mean([0, 1], keepdims=False) if reduction == "mean" else flat.sum([0, 1], keepdims=False)}
'''

SML_GRAD = '''
from opgen.dsl import derive_grad

spec = derive_grad("sml.py", "SoftMarginLossGrad", aclnn="aclnnSoftMarginLossBackward", wrt=["self"],
                   grads={"out": "gradOutput"}, names={"self": "gradInput"})
'''

NP = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    d = tmp_path_factory.mktemp("one")
    out = {}
    for name, text in (("smlg", SMLG), ("rnq", RNQ), ("bce", BCE), ("bce_grad", BCE_GRAD),
                       ("sml", SML), ("sml_grad", SML_GRAD)):
        (d / f"{name}.py").write_text(text)
        out[name] = d / f"{name}.py"
    return out


def _smlg_inputs(rng, shape, red, dt):
    p = rng.uniform(-4, 4, shape).astype(NP[dt])
    lab = rng.choice([-1.0, 1.0], shape).astype(NP[dt])
    dout = (rng.uniform(0.5, 2, shape) if red == 0 else rng.uniform(0.5, 2, (1,))).astype(NP[dt])
    return {"predict": p, "label": lab, "dout": dout}


SUB = {"float32": 0.0, "float16": 2.0**-25, "bfloat16": 0.0}
"""Half the spacing of the output dtype's subnormals (a mean's small gradients are fp16 subnormals)."""


def _smlg_ref(inp, red):
    p, lab, d = (np.asarray(inp[k], np.float64) for k in ("predict", "label", "dout"))
    g = -lab / (1 + np.exp(lab * p)) * d
    return g / p.size if red == 1 else g


def _rnq_ref(inp, eps=0.1):
    x, g, bt, s = (np.asarray(inp[k], np.float64) for k in ("x", "gamma", "beta", "scale"))
    q = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g + bt
    return np.clip(np.rint(q / s + float(inp["offset"][0])), -128, 127)


def test_the_value_is_read_once_in_init(specs):
    """The program: one float member per single-value input, set in Init from GM element 0; no row copy of it."""
    from opgen.check.kirengine import kernel_classes
    from opgen.kernel import kir

    spec = load_spec(str(specs["rnq"]))
    text = kir.to_text(kernel_classes(spec)[0])
    lines = [ln.strip() for ln in text.splitlines()]
    assert lines.count("one_scale_ := load gm_scale[0]") == 1 and lines.count("one_offset_ := load gm_offset[0]") == 1
    assert any("scalar=one_offset_" in ln for ln in lines) and any("scalar=one_scale_" in ln for ln in lines)
    cls = kernel_classes(spec)[0]
    assert {s.name for s in cls.scalars} >= {"one_scale_", "one_offset_"}


@pytest.mark.parametrize("red", [0, 1, 2])
@pytest.mark.parametrize("dims, dt", [((7, 33), "float32"), ((97, 1031), "float16"), ((3, 30000), "bfloat16")])
def test_soft_margin_loss_grad_kernel_ir(specs, red, dims, dt):
    rng = np.random.default_rng(dims[1] + red)
    inp = _smlg_inputs(rng, dims, red, dt)
    r = run_check(str(specs["smlg"]), inputs=inp, attrs={"reduction": red}, dtypes={"T": dt}, engine="kir",
                  progress=False)
    assert r.passed and not r.faults, r.faults[:2]
    ref = _smlg_ref(inp, red)
    tol = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}[dt]
    got = np.asarray(r.arrays["gradient"], np.float64)
    assert np.all(np.abs(got - ref) <= tol * np.abs(ref) + tol * 1e-2 * np.abs(ref).max() + SUB[dt]), \
        np.abs(got - ref).max()


def test_rms_norm_quant_kernel_ir(specs):
    rng = np.random.default_rng(3)
    inp = {"x": rng.standard_normal((97, 1031)).astype(np.float16),
           "gamma": rng.uniform(0.5, 1.5, 1031).astype(np.float16), "beta": rng.uniform(-0.2, 0.2, 1031).astype(np.float16),
           "scale": np.array([0.02], np.float16), "offset": np.array([-3], np.int8)}
    r = run_check(str(specs["rnq"]), inputs=inp, dtypes={"T": "float16"}, engine="kir", progress=False)
    assert r.passed and not r.faults, r.faults[:2]
    got, ref = np.asarray(r.arrays["y"], np.float64), _rnq_ref(inp)
    # fp32 arithmetic may fall on the other side of a rounding boundary than float64: off by one, rarely
    assert np.abs(got - ref).max() <= 1 and (got != ref).mean() < 1e-3
    assert (ref == -128).any() and (ref == 127).any()   # both saturation bounds are exercised


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_emulated_kernels(specs, tmp_path):
    from opgen.codegen import write_ops

    write_ops([str(specs["smlg"]), str(specs["rnq"])], tmp_path)
    rng = np.random.default_rng(5)
    for red, dims, dt in ((1, (97, 1031), "float16"), (2, (3, 30000), "float32"), (0, (5, 1), "bfloat16")):
        inp = _smlg_inputs(rng, dims, red, dt)
        r = run_check(str(specs["smlg"]), inputs=inp, attrs={"reduction": red}, dtypes={"T": dt}, gen_dir=tmp_path,
                      progress=False)
        assert r.passed and not r.faults, r.faults[:2]
        ref = _smlg_ref(inp, red)
        tol = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}[dt]
        got = np.asarray(r.arrays["gradient"], np.float64)
        assert np.all(np.abs(got - ref) <= tol * np.abs(ref) + tol * 1e-2 * np.abs(ref).max() + SUB[dt])
    inp = {"x": rng.standard_normal((61, 4000)).astype(ml_dtypes.bfloat16),
           "gamma": rng.uniform(0.5, 1.5, 4000).astype(ml_dtypes.bfloat16),
           "beta": rng.uniform(-0.2, 0.2, 4000).astype(ml_dtypes.bfloat16),
           "scale": np.array([0.01], ml_dtypes.bfloat16), "offset": np.array([5], np.int8)}
    r = run_check(str(specs["rnq"]), inputs=inp, dtypes={"T": "bfloat16"}, gen_dir=tmp_path, progress=False)
    assert r.passed and not r.faults, r.faults[:2]
    got, ref = np.asarray(r.arrays["y"], np.float64), _rnq_ref(inp)
    assert np.abs(got - ref).max() <= 1 and (got != ref).mean() < 1e-3 and (ref == 127).any()   # saturates too


def test_an_int64_single_value_is_refused_in_the_users_terms(tmp_path):
    from opgen.kernel.family import NoKernel
    from opgen.tiling.pipeline import compile_unit

    p = tmp_path / "bad.py"
    p.write_text(SMLG.replace('spec.input("dout", T, {0: [Bd, H], 1: [1], 2: [1]}, form_by="reduction")',
                              'spec.input("dout", i64, [1])').replace("bf16, f16, f32", "bf16, f16, f32, i64")
                 .replace("* dout", "* dout.f32()"))
    with pytest.raises(NoKernel, match="input dout holds one value of dtype i64; the rows family reads a "
                                       "single-value input of f32, f16, bf16, i8, u8, i16 or i32"):
        compile_unit(load_spec(str(p)))


@pytest.mark.parametrize("red", [0, 1, 2])
def test_a_derived_loss_gradient_reads_its_single_value_grad_output(specs, red):
    """BinaryCrossEntropyGrad derived from the forward (derive_grad): for reduction mean / sum the gradient of the
    0-d loss is one value broadcast over the input (a reshape of a single value into the rows stays one value, and
    its negation is a Duplicate of the negated value); the Kernel IR engine against torch autograd in float64."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11 + red)
    x = rng.uniform(0.05, 0.95, (97, 1031)).astype(np.float32)
    y = rng.uniform(0, 1, (97, 1031)).astype(np.float32)
    g = (rng.uniform(0.5, 2, (97, 1031)) if red == 0 else np.array(rng.uniform(0.5, 2))).astype(np.float32)
    r = run_check(str(specs["bce_grad"]), inputs={"x": x, "y": y, "grad_output": g}, attrs={"reduction": red},
                  dtypes={"T": "float32"}, engine="kir", progress=False)
    assert r.passed and not r.faults, r.faults[:2]
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    loss = torch.nn.functional.binary_cross_entropy(xt, torch.tensor(y, dtype=torch.float64),
                                                    reduction=("none", "mean", "sum")[red])
    loss.backward(torch.tensor(g, dtype=torch.float64))
    ref = xt.grad.numpy()
    got = np.asarray(r.arrays["dx"], np.float64)
    assert np.all(np.abs(got - ref) <= 1e-5 * np.abs(ref) + 1e-7 * np.abs(ref).max()), np.abs(got - ref).max()


@pytest.mark.parametrize("red", ["none", "mean", "sum"])
def test_a_derived_gradient_whose_single_value_meets_a_constant_first(specs, red):
    """SoftMarginLossGrad derived from the forward: for mean the 0-d loss's gradient, broadcast over the input, is
    multiplied by the constant 1 / count before it meets a row value (two single values into a row: one value
    on the scalar unit, Duplicated; an internal IndexError in rowprog.lower_elementwise before, found by a new
    user). The Kernel IR engine against torch autograd in float64."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng({"none": 1, "mean": 2, "sum": 3}[red])
    x = rng.uniform(-4, 4, (37, 1001)).astype(np.float32)
    t = rng.choice([-1.0, 1.0], (37, 1001)).astype(np.float32)
    g = (rng.uniform(0.5, 2, (37, 1001)) if red == "none" else np.array(rng.uniform(0.5, 2))).astype(np.float32)
    r = run_check(str(specs["sml_grad"]), inputs={"self": x, "target": t, "gradOutput": g}, attrs={"reduction": red},
                  dtypes={"T": "float32"}, engine="kir", progress=False)
    assert r.passed and not r.faults, r.faults[:2]
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    loss = torch.nn.functional.soft_margin_loss(xt, torch.tensor(t, dtype=torch.float64), reduction=red)
    loss.backward(torch.tensor(g, dtype=torch.float64))
    ref = xt.grad.numpy()
    got = np.asarray(r.arrays["gradInput"], np.float64)
    assert np.all(np.abs(got - ref) <= 1e-5 * np.abs(ref) + 1e-7 * np.abs(ref).max()), np.abs(got - ref).max()
