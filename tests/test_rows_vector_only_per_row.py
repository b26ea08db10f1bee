"""A per-row exp or log (the scalar unit has no form of either, docs/reference/ascendc.md §1.4) that only row
values read is taken on the value broadcast to the row (opgen.kernel.rows._broadcast_space; docs/design.md
"Per-row values the scalar unit cannot compute"), as a spec that broadcasts it first is lowered; one that stays per
row (an output, a reader of its own per row) is taken by the vector instruction on 8 lanes holding the value.
Values against torch in float64 (SoftmaxCrossEntropyWithLogits of ops-nn's catalogue, written the plain way:
`log(exp(z).sum(-1, keepdims=True))`, which new users wrote and the rows family refused)."""

from __future__ import annotations

import numpy as np
import pytest

from opgen.check import run_check

_SCE = '''
from opgen.dsl import A2, OpSpec, bf16, f16, f32

spec = OpSpec("SoftmaxCrossEntropyWithLogits", aclnn="aclnnSoftmaxCrossEntropyWithLogits", socs=(A2,),
              round="rint")
N = spec.dim("N")
C = spec.dim("C", max=65536)
(T,) = spec.dtype_vars("T")
spec.input("features", T, [N, C])
spec.input("labels", T, [N, C])
spec.output("loss", T, [N])
spec.output("backprop", T, [N, C])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, features, labels):
    z = features - features.max(-1)
    lse = b.log(b.exp(z).sum(-1, keepdims=True))
    logp = z - lse
    return {"loss": (-(labels * logp).sum(-1)).reshape([N]), "backprop": b.exp(logp) - labels}
'''

_SCALE_BY_EXP = '''
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("ScaleByExpOfMean", aclnn="aclnnScaleByExpOfMean", socs=(A2,), round="rint")
N = spec.dim("N")
H = spec.dim("H")
spec.input("x", f32, [N, H])
spec.output("y", f32, [N, H])


@spec.body
def _(b, x):
    return {"y": x * b.exp(-x.mean(-1, keepdims=True))}
'''

_LSE_OUT = '''
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("RowLogSumExp", aclnn="aclnnRowLogSumExp", socs=(A2,), round="rint")
N = spec.dim("N")
H = spec.dim("H")
spec.input("x", f32, [N, H])
spec.output("lse", f32, [N, 1])


@spec.body
def _(b, x):
    return {"lse": b.log(b.exp(x).sum(-1, keepdims=True))}
'''


def _write(tmp_path, name, text):
    p = tmp_path / f"{name}.py"
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("n, c, dt", [(7, 45, "float32"), (9, 3000, "bfloat16"), (3, 20000, "float16")])
def test_softmax_cross_entropy_with_a_per_row_log_against_torch(tmp_path, n, c, dt):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(n * c)
    feats = rng.normal(0, 3, (n, c))
    labels = rng.dirichlet(np.ones(c), n)
    npdt = {"float32": np.float32, "float16": np.float16}.get(dt)
    if npdt is None:
        import ml_dtypes
        npdt = ml_dtypes.bfloat16
    inp = {"features": feats.astype(npdt), "labels": labels.astype(npdt)}
    r = run_check(_write(tmp_path, "sce", _SCE), inputs=inp, dtypes={"T": dt}, engine="kir", progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    f = torch.tensor(np.asarray(inp["features"], np.float64))
    lab = torch.tensor(np.asarray(inp["labels"], np.float64))
    logp = torch.log_softmax(f, -1)
    tol = {"float32": 2e-5, "float16": 4e-3, "bfloat16": 3e-2}[dt]
    np.testing.assert_allclose(np.asarray(r.arrays["loss"], np.float64), (-(lab * logp).sum(-1)).numpy(),
                               rtol=tol, atol=tol)
    np.testing.assert_allclose(np.asarray(r.arrays["backprop"], np.float64), (logp.exp() - lab).numpy(),
                               rtol=tol, atol=tol)


def test_a_per_row_exp_read_by_the_row_against_float64(tmp_path):
    x = np.random.default_rng(3).normal(0, 1, (11, 130)).astype(np.float32)
    r = run_check(_write(tmp_path, "sbe", _SCALE_BY_EXP), inputs={"x": x}, engine="kir", progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(r.arrays["y"], x64 * np.exp(-x64.mean(-1, keepdims=True)), rtol=2e-6, atol=1e-7)


def test_a_per_row_log_that_is_an_output_is_taken_on_8_lanes(tmp_path):
    """The per-row log stays per row (an output): the vector Ln on 8 lanes holding the row sum (rowprog `sunary`),
    against torch.logsumexp in float64."""
    import torch

    x = np.random.default_rng(5).normal(0, 2, (9, 77)).astype(np.float32)
    r = run_check(_write(tmp_path, "lse", _LSE_OUT), inputs={"x": x}, engine="kir", progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    want = torch.logsumexp(torch.from_numpy(x.astype(np.float64)), -1, keepdim=True).numpy()
    np.testing.assert_allclose(r.arrays["lse"], want, rtol=2e-6, atol=1e-6)
