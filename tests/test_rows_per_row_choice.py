"""Comparisons and `b.where` of per-row values on the scalar unit (docs/design.md "Per-row comparisons and
choices"): a comparison of per-row values is a 0 / 1 number `(a <cmp> b ? 1.0f : 0.0f)`, a `b.where` choosing between
per-row values the conditional `(c != 0.0f ? x : y)` (Kernel IR's FCond). A new user met the refusal writing
CosineEmbeddingLoss (ops-nn loss/cosine_embedding_loss): the loss of each row picks 1 - cos or max(0, cos - margin)
by the row's target. Oracle: torch.nn.functional.cosine_embedding_loss in float64."""

import numpy as np
import pytest

from opgen.check.run import run_check
from opgen.kernel import kir
from opgen.kernel.rowfexpr import parse

SPEC = '''
from opgen.dsl import A2, OpSpec, bf16, f16, f32

spec = OpSpec("CosineEmbeddingLossProbe", aclnn="aclnnCosineEmbeddingLossProbe", socs=(A2,), round="rint",
              doc="mean over rows of 1 - cos (target 1) or max(0, cos - margin) (target -1)")
N = spec.dim("N")
D = spec.dim("D", max=16384)
(T,) = spec.dtype_vars("T")
spec.input("x1", T, [N, D])
spec.input("x2", T, [N, D])
spec.input("target", T, [N])
spec.attr("margin", float, 0.0)
spec.output("out", f32, [])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x1, x2, target, margin):
    dot = (x1 * x2).sum(-1, keepdims=False)
    n1 = (x1 * x1).sum(-1, keepdims=False) + 1e-12
    n2 = (x2 * x2).sum(-1, keepdims=False) + 1e-12
    cos = dot * b.rsqrt(n1 * n2)
    t = target.f32()
    loss = b.where(t > 0.0, 1.0 - cos, b.maximum(cos - margin, 0.0))
    return {"out": loss.mean(0, keepdims=False)}
'''


def test_the_row_texts_parse_to_a_conditional():
    f = parse("(s0 != 0.0f ? s9 : s11)", ())
    assert isinstance(f, kir.FCond) and f.cmp == "!=" and f.x == kir.FRef("s9")
    assert isinstance(parse("(a > b ? a : b)", ()), kir.FMinMax)   # the max form stays a max
    assert isinstance(parse("(a >= b ? 1.0f : 0.0f)", ()), kir.FCond)


@pytest.mark.parametrize("n, d, dtype", [(37, 301, "float32"), (5, 4097, "bfloat16")])
def test_cosine_embedding_loss_matches_torch(tmp_path, n, d, dtype):
    import ml_dtypes
    import torch

    p = tmp_path / "cosine_embedding_loss_probe.py"
    p.write_text(SPEC)
    rng = np.random.default_rng(n * d)
    x1 = rng.standard_normal((n, d)).astype(np.float32)
    x2 = (0.3 * x1 + rng.standard_normal((n, d))).astype(np.float32)
    t = np.where(rng.random(n) < 0.5, 1.0, -1.0).astype(np.float32)
    r = run_check(str(p), inputs={"x1": x1, "x2": x2, "target": t}, dtypes={"T": dtype}, attrs={"margin": 0.1},
                  progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:2]
    cast = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}[dtype]
    a, b = (torch.from_numpy(v.astype(cast).astype(np.float64)) for v in (x1, x2))
    want = torch.nn.functional.cosine_embedding_loss(a, b, torch.from_numpy(t.astype(np.float64)), margin=0.1)
    np.testing.assert_allclose(float(r.arrays["out"]), want.item(), rtol=2e-6 if dtype == "float32" else 1e-3)


COMPARE_STATS = '''
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("CompareStats", aclnn="aclnnCompareStats", socs=(A2,))
R, H = spec.dims("R H")
spec.input("x", f32, [R, H])
spec.output("y", f32, [R, H])


@spec.body
def _(b, x):
    return {"y": b.where(x.sum(-1) > 0.0, x, 0.0)}
'''


@pytest.mark.parametrize("rows, h", [(37, 301), (5, 70001)])
def test_a_per_row_comparison_choosing_between_rows(tmp_path, rows, h):
    """The per-row 0 / 1 number broadcast to the row and compared once (a Duplicate, Compares NE 0): the row Select
    of whole rows by a per-row condition (rows whose sums sit far from 0, so the fp32 sum's sign is float64's)."""
    p = tmp_path / "compare_stats.py"
    p.write_text(COMPARE_STATS)
    rng = np.random.default_rng(rows)
    x = (rng.standard_normal((rows, h)) + np.where(rng.random((rows, 1)) < 0.5, 1.0, -1.0)).astype(np.float32)
    r = run_check(str(p), inputs={"x": x}, progress=False, engine="kir")
    assert not r.faults and r.passed, r.faults[:2]
    np.testing.assert_array_equal(r.arrays["y"], np.where(x.astype(np.float64).sum(-1, keepdims=True) > 0, x, 0))
