"""Useful MACs of masked matmuls (opgen.check.useful_macs, docs/reference/kernel_cost.md §3): checked against a
hand count in NumPy — the terms (query row, key, head dim) whose score the mask keeps, per matmul."""

import textwrap
from pathlib import Path

import numpy as np
import pytest

from opgen.check import cost
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples" / "specs"


def _macs(spec, static, env):
    """matmul_macs of the specialisation of `spec` whose static attributes are `static`."""
    key = next(k for k in spec.keys() if k.static == static)
    return cost.matmul_macs(spec.graph(key), env)


def _kept(s1, s2, shift):
    """Keys a causal mask keeps, counted one by one: key j visible to query row i iff j <= i + shift."""
    return sum(1 for i in range(s1) for j in range(s2) if j <= i + shift)


@pytest.mark.parametrize("mode", [0, 2, 3])
def test_flash_attention_useful_macs_are_the_kept_scores(mode):
    """FlashAttentionScore: Q Kᵀ and P V each cost D MACs per kept (row, key) pair and head; no mask keeps all
    S1 x S2, leftUpCausal row i keys 0..i, rightDownCausal keys 0..i + S2 - S1."""
    env = {"B": 2, "N1": 4, "N2": 2, "S1": 33, "S2": 70, "D": 16, "MS1": 33, "MS2": 70}
    kept = 33 * 70 if mode == 0 else _kept(33, 70, 0 if mode == 2 else 70 - 33)
    got = _macs(load_spec(str(EX / "flash_attention_score.py")), ("BNSD", mode), env)
    assert got == 2 * 2 * 4 * 16 * kept


def test_flash_attention_grad_useful_macs_are_the_kept_scores():
    """FlashAttentionScoreGrad (causal): five matmuls (S = Q Kᵀ, dP = dY Vᵀ, dQ = dS K, dK = dSᵀ Q, dV = Pᵀ dY),
    each D MACs per kept pair: dP's masked elements meet P = 0, dS and P are 0 there."""
    env = {"B": 1, "N1": 2, "N2": 1, "S1": 40, "S2": 40, "D": 32, "MS1": 40, "MS2": 40}
    got = _macs(load_spec(str(EX / "flash_attention_score_grad.py")), ("BNSD", 2), env)
    assert got == 5 * 2 * 32 * _kept(40, 40, 0)
    assert _macs(load_spec(str(EX / "flash_attention_score_grad.py")), ("BNSD", 0), env) == 5 * 2 * 32 * 40 * 40


BAND = '''
from opgen.dsl import A2, OpSpec, boolean, f16
spec = OpSpec("BandAttention", aclnn="aclnnBandAttention", socs=(A2,), doc="band attention test spec", source="test")
S1, S2, D = spec.dims("S1 S2 D")
spec.input("q", f16, [S1, D])
spec.input("k", f16, [S2, D])
spec.input("v", f16, [S2, D])
{mask_input}
spec.attr("w", int, 3, static=True, choices=(0, 3, 60))
spec.output("y", f16, [S1, D])


@spec.body
def _(b, q, k, v, {mask_arg}w):
    s = b.matmul(q, k, transpose_b=True)
    i = b.iota(S1).reshape([S1, 1])
    j = b.iota(S2).reshape([1, S2])
    {mask_expr}
    s = b.where(far, -3.4028234663852886e38, s)
    e = b.exp(s - s.max(-1))
    return {{"y": b.matmul(e / e.sum(-1), v).cast(f16, "rint")}}
'''


def _band_spec(tmp_path, name, mask_expr, mask_input="", mask_arg=""):
    p = tmp_path / f"{name}.py"
    p.write_text(textwrap.dedent(BAND).format(mask_expr=mask_expr, mask_input=mask_input, mask_arg=mask_arg))
    return load_spec(str(p))


def test_band_mask_counts_the_band(tmp_path):
    """A band |i - j| <= w: each matmul D MACs per (row, key) pair inside the band (NumPy count)."""
    spec = _band_spec(tmp_path, "band", "far = b.abs(j - i) > w")
    s1, s2, d = 29, 50, 16
    i, j = np.arange(s1)[:, None], np.arange(s2)[None, :]
    for w in (0, 3, 60):
        kept = int((np.abs(j - i) <= w).sum())
        assert _macs(spec, (w,), {"S1": s1, "S2": s2, "D": d}) == 2 * d * kept


def test_fully_masked_rows_count_whole(tmp_path):
    """A row with every key masked has max = -FLT_MAX and exp(0) = 1 on every key: P is uniform, not zero, so its
    P V terms are useful (its Q Kᵀ terms are dead: every score is replaced)."""
    spec = _band_spec(tmp_path, "rows", "far = (i >= 10) | (j > i)")
    s1, s2, d = 16, 16, 16
    i, j = np.arange(s1)[:, None], np.arange(s2)[None, :]
    kept = int(((i < 10) & (j <= i)).sum())
    pv = int(((i < 10) & (j <= i)).sum()) + (s1 - 10) * s2
    assert _macs(spec, (3,), {"S1": s1, "S2": s2, "D": d}) == d * (kept + pv)


def test_a_mask_input_keeps_every_term(tmp_path):
    """A mask that is an input is data: no term is removed (a kernel cannot skip it from the shapes)."""
    spec = _band_spec(tmp_path, "data", "far = m", mask_input='spec.input("m", boolean, [S1, S2])',
                      mask_arg="m, ")
    assert _macs(spec, (3,), {"S1": 9, "S2": 21, "D": 16}) == 2 * 9 * 21 * 16


ZERO_OVER_ZERO = '''
from opgen.dsl import A2, OpSpec, f32
spec = OpSpec("ZeroOverZero", aclnn="aclnnZeroOverZero", socs=(A2,), doc="0 / 0 test spec", source="test")
M, K, N = spec.dims("M K N")
spec.input("x", f32, [M, K])
spec.input("v", f32, [K, N])
spec.output("y", f32, [M, N])


@spec.body
def _(b, x, v):
    top = (b.iota(M) < 2).reshape([M, 1])
    num = b.where(top, 0.0, x)
    den = b.where(top, 0.0, 1.0)
    return {"y": b.matmul(num / den, v)}
'''


def test_zero_over_a_known_zero_is_not_zero(tmp_path):
    """0 / 0 is NaN, not 0: a quotient whose divisor is known to be zero there keeps its terms (NumPy: the rows the
    matmul reads are NaN, so every product of them reaches the output)."""
    p = tmp_path / "zero_over_zero.py"
    p.write_text(ZERO_OVER_ZERO)
    spec = load_spec(str(p))
    m, k, n = 7, 5, 3
    with np.errstate(all="ignore"):
        top = (np.arange(m) < 2)[:, None]
        a = np.where(top, 0.0, np.ones((m, k))) / np.where(top, 0.0, 1.0)   # the left operand where x is 1
    assert np.isnan(a[:2]).all()
    useful = int((a != 0).sum()) * n   # NaN != 0: every element of A, each n times
    assert _macs(spec, (), {"M": m, "K": k, "N": n}) == useful == m * k * n
