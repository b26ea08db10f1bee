"""NormRopeConcat (forward) and NormRopeConcatGrad (backward) through the opgen interpreter.

Goldens come from the independent float64 torch oracles in tests/oracles.py
(norm_rope_concat_fwd, norm_rope_concat_grad at the provided statistics,
norm_rope_concat_grad_autograd with statistics recomputed from x) and from the worked examples of
docs/reference/norm_rope_concat.md §6.1 / §6.2.  Facts used: §1 (forward pipeline, norm modes, RoPE on the
first R concatenated positions, fp32 compute + CAST_ROUND), §2 (backward, weight/bias grads per part,
zero added-weight grads for absent encoders), §6 (examples), §7.12 (ties-away rounding).

Exact mode (float64 on the dtype-converted inputs) must match the oracles to ~1e-9 (relative to the
largest golden magnitude of each output); device mode (fp32 compute, rounded outputs) must meet CANN's
precision standard (tests/precision.py) against the same float64 goldens.
"""

from __future__ import annotations

import itertools
import sys
import time
import zlib
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from covering import pairwise, uncovered  # noqa: E402
from inproc import cli  # noqa: E402
from oracles import norm_rope_concat_fwd, norm_rope_concat_grad, norm_rope_concat_grad_autograd  # noqa: E402
from precision import assert_cann_precision, assert_cann_precision_small_values, mere_mare  # noqa: E402

from opgen.dsl.examples import random_inputs  # noqa: E402
from opgen.interp import interpret  # noqa: E402
from opgen.registry import load_spec  # noqa: E402

FWD, BWD = "NormRopeConcat", "NormRopeConcatGrad"
FWD_SPEC, BWD_SPEC = load_spec(FWD), load_spec(BWD)

NP_DTYPE = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
DTYPES = list(NP_DTYPE)
EXACT_RTOL = 1e-9

# norm_type x norm_added_type x rope_type x concat_order (54) and x is_training (108)
BWD_COMBOS = list(itertools.product(range(3), range(3), range(3), range(2)))
FWD_COMBOS = [c + (t,) for c in BWD_COMBOS for t in (False, True)]
ATTR_NAMES = ("norm_type", "norm_added_type", "rope_type", "concat_order", "is_training")


def _rows(n_attrs, must):
    """(dtype, combination) pairs of a covering array of strength 2 (tests/covering.py) over the dtype and the
    first `n_attrs` attributes: every pair of values of any two of them (so every single value, every dtype)
    at least once, with the `must` rows (dtype, combination) kept. The full products run in the sweeps below
    (every combination once; every dtype x every backward combination in the autograd and chain tests)."""
    factors = {"dtype": DTYPES, **{a: sorted({c[k] for c in FWD_COMBOS}) for k, a in enumerate(ATTR_NAMES[:n_attrs])}}
    rows = pairwise(factors, must=[dict(zip(factors, (d, *c))) for d, c in must])
    return [(r["dtype"], tuple(r[a] for a in ATTR_NAMES[:n_attrs])) for r in rows]


# the README case (norm types 2, rope 2, concat 1, bf16) and the all-off combination (no norm, no rope)
BWD_ROWS = _rows(4, [("bfloat16", (2, 2, 2, 1)), ("float32", (0, 0, 0, 0))])
FWD_ROWS = _rows(5, [("bfloat16", (2, 2, 2, 1, True)), ("float32", (0, 0, 0, 0, False)),
                     ("float16", (1, 1, 1, 0, False))])


def _cid(c):
    """Readable pytest id of an attribute combination."""
    s = f"n{c[0]}a{c[1]}r{c[2]}o{c[3]}"
    return s + (("-train" if c[4] else "-inf") if len(c) > 4 else "")


def _rid(row):
    """Readable pytest id of a (dtype, combination) row."""
    return f"{row[0]}-{_cid(row[1])}"


# Shape cases (B, N, D, Sq, Sk, Seq, Sek) plus the rule choosing R from SQ = Sq+Seq, SK = Sk+Sek:
#   "lt": R = min(SQ, SK) - 1 (< every S_total), "min": R = min(SQ, SK), "one": R = 1.
SHAPES = {
    "s1":    (dict(B=2, N=3, D=6, Sq=3, Sk=5, Seq=2, Sek=4), "lt"),    # Sq != Sk, D=6, R reaches encoder rows
    "d34":   (dict(B=1, N=1, D=34, Sq=1, Sk=2, Seq=3, Sek=1), "min"),  # N=1, S=1, D=34, R == min(SQ, SK)
    "d2":    (dict(B=1, N=2, D=2, Sq=1, Sk=1, Seq=1, Sek=2), "min"),   # D=2, S=1
    "d64r1": (dict(B=1, N=2, D=64, Sq=6, Sk=4, Seq=5, Sek=7), "one"),  # R=1, Seq/Sek > Sq/Sk
}
# which encoders are present: query-side (encoder_query) / key-side (encoder_key [+ encoder_value])
ENCODERS = {"both": (True, True), "none": (False, False), "q_only": (True, False), "k_only": (False, True)}
EXACT_CASES = [(s, e) for s in SHAPES for e in ("both", "none")] + [("s1", "q_only"), ("s1", "k_only")]
STRUCT_CASES = [("s1", "both"), ("s1", "none"), ("d34", "q_only"), ("d2", "both"), ("d64r1", "k_only")]
# Device grids: fewer shapes.  D = 2 is kept for the forward only: at D = 2 the LayerNorm input gradient
# is ~eps/var times its terms (identically 0 when eps = 0), so its fp32 value is pure cancellation noise
# (condition number ~var/eps) for any fp32 implementation; exact mode covers D = 2 backward.
FWD_DEVICE_CASES = [(s, e) for s in ("s1", "d2") for e in ("both", "none")] + [("d34", "q_only")]
BWD_DEVICE_CASES = [("s1", "both"), ("s1", "none"), ("d34", "q_only"), ("d64r1", "k_only")]


def _dims(shape, enc):
    """Dims for random_inputs: absent encoders drop Seq/Sek; R from the shape's rule."""
    base, rule = SHAPES[shape]
    has_q, has_k = ENCODERS[enc]
    d = dict(base)
    if not has_q:
        del d["Seq"]
    if not has_k:
        del d["Sek"]
    m = min(d["Sq"] + d.get("Seq", 0), d["Sk"] + d.get("Sek", 0))
    d["R"] = {"lt": max(1, m - 1), "min": m, "one": 1}[rule]
    return d


def _bwd_attrs(c):
    """Backward attribute dict of a combination tuple."""
    return dict(norm_type=c[0], norm_added_type=c[1], rope_type=c[2], concat_order=c[3])


def _fwd_attrs(c):
    """Forward attribute dict; every third combination uses a non-default eps (visible against var ~ 1)."""
    a = dict(_bwd_attrs(c), is_training=c[4])
    if FWD_COMBOS.index(c) % 3 == 1:
        a["eps"] = 0.25
    return a


def _seed(*parts):
    """Deterministic seed from a case description."""
    return zlib.crc32(repr(parts).encode())


def _assert_exact(out, gold, what):
    """Same output names; every output float64 and |out - gold| <= 1e-9 * max(1, max|gold|) (inputs are O(1);
    the floor covers outputs that are mathematically 0, e.g. LayerNorm grads at D = 2)."""
    assert set(out) == set(gold), f"{what}: outputs {sorted(out)} != expected {sorted(gold)}"
    for k, g in gold.items():
        a = out[k]
        assert a.dtype == np.float64, f"{what} {k}: exact mode dtype {a.dtype}"
        assert a.shape == g.shape, f"{what} {k}: shape {a.shape} != {g.shape}"
        if g.size == 0:
            continue
        scale = max(1.0, float(np.abs(g).max()))
        err = float(np.abs(a - g).max())
        assert err <= EXACT_RTOL * scale, f"{what} {k}: max abs err {err:.3g} vs scale {scale:.3g}"


def _assert_absent_encoder_zeros(out, inputs, attrs, what):
    """§2.3: with norm_added_type 2, an absent encoder's weight/bias grads are exactly 0."""
    if attrs["norm_added_type"] != 2:
        return
    for part, prefix in (("encoder_query", "norm_added_query"), ("encoder_key", "norm_added_key")):
        if inputs.get(part) is None:
            for w in ("weight", "bias"):
                a = out[f"grad_{prefix}_{w}"]
                assert a.shape == (inputs["query"].shape[-1],) and not np.any(a), f"{what} grad_{prefix}_{w} != 0"


# CANN's commercial standard splits elements at a small-value boundary (docs/reference/ada_layer_norm.md §5.5):
# |golden| < 2^-11 (fp16), 2^-8 (bf16), 2^-14 (fp32).  The experimental MERE/MARE rule divides by
# |golden| + 1e-7, so on a golden of ~1e-7 produced by cancellation (LayerNorm-backward projection, RoPE
# sums, D = 2 LayerNorm grads that are identically 0) the unavoidable fp32 compute noise (~1e-8 of the
# row scale) alone gives relative errors > 10 Th, e.g. MARE 0.105 on the README bf16 case.  So:
# normal elements -> the experimental standard (assert_cann_precision: MERE < Th, MARE < 10 Th);
# small elements  -> the mixed-tolerance standard's per-element bound |a - g| <= Th + Th |g|.
def _cann_check(actual, golden, dtype, what):
    """CANN precision check of one output: tests/precision.assert_cann_precision_small_values."""
    assert_cann_precision_small_values(actual, golden, dtype, what)


def _assert_device(out, gold, dtype, what):
    """Same output names; declared dtype (stats fp32); CANN precision standard against the golden."""
    assert set(out) == set(gold), f"{what}: outputs {sorted(out)} != expected {sorted(gold)}"
    for k, g in gold.items():
        a = out[k]
        stat = k.endswith("_mean") or k.endswith("_rstd")
        want = np.float32 if stat else NP_DTYPE[dtype]
        assert a.dtype == want, f"{what} {k}: device dtype {a.dtype}, expected {np.dtype(want)}"
        _cann_check(a, g, "float32" if stat else dtype, f"{what} {k}")


def _bwd_inputs(dims, attrs, dtype, seed):
    """Random valid backward inputs built here (not by opgen's random_inputs, which cannot omit the
    encoders of NormRopeConcatGrad, see test_cli_backward_dims_without_encoders): N(0,1) tensors in
    dtype T, stats = true float64 statistics of the typed x (eps 1e-5) rounded to fp32."""
    rng = np.random.default_rng(seed)
    t = NP_DTYPE[dtype]
    B, N, D, R = dims["B"], dims["N"], dims["D"], dims["R"]
    Sq, Sk, Seq, Sek = dims["Sq"], dims["Sk"], dims.get("Seq", 0), dims.get("Sek", 0)
    rnd = lambda *s: rng.standard_normal(s).astype(t)  # noqa: E731
    inputs = dict(grad_query_output=rnd(B, N, Sq + Seq, D), grad_key_output=rnd(B, N, Sk + Sek, D),
                  grad_value_output=rnd(B, N, Sk + Sek, D), query=rnd(B, Sq, N, D), key=rnd(B, Sk, N, D),
                  encoder_query=rnd(B, Seq, N, D) if "Seq" in dims else None,
                  encoder_key=rnd(B, Sek, N, D) if "Sek" in dims else None,
                  rope_sin=rnd(R, D), rope_cos=rnd(R, D))
    for prefix, part, t_ in (("norm_query", "query", attrs["norm_type"]), ("norm_key", "key", attrs["norm_type"]),
                             ("norm_added_query", "encoder_query", attrs["norm_added_type"]),
                             ("norm_added_key", "encoder_key", attrs["norm_added_type"])):
        x = inputs[part]
        if x is None or t_ == 0:
            continue
        x64 = x.astype(np.float64)
        m = x64.mean(-1, keepdims=True)
        inputs[f"{prefix}_mean"] = m.astype(np.float32)
        inputs[f"{prefix}_rstd"] = (1 / np.sqrt(((x64 - m) ** 2).mean(-1, keepdims=True) + 1e-5)).astype(np.float32)
        if t_ == 2:
            inputs[f"{prefix}_weight"] = rnd(D)
    return inputs


def _bwd_case(shape, enc, combo, dtype):
    """Attributes and random valid backward inputs for a shape case and encoder presence."""
    attrs = _bwd_attrs(combo)
    return attrs, _bwd_inputs(_dims(shape, enc), attrs, dtype, _seed("bwd", shape, enc, combo, dtype))


def _fwd_case(shape, enc, combo, dtype):
    """Attributes and random valid forward inputs."""
    attrs = _fwd_attrs(combo)
    inputs = random_inputs(FWD_SPEC, _dims(shape, enc), attrs, {"T": dtype}, _seed("fwd", shape, enc, combo, dtype))
    return attrs, inputs


def _fwd_gold(inputs, attrs):
    """Forward oracle; statistics are outputs only when is_training (§1.5)."""
    kw = {k: v for k, v in attrs.items() if k != "is_training"}
    gold = norm_rope_concat_fwd(**inputs, **kw)
    if not attrs["is_training"]:
        gold = {k: v for k, v in gold.items() if not (k.endswith("_mean") or k.endswith("_rstd"))}
    return gold


def test_specialisations_cover_attribute_grid():
    """§4.4: the specs specialise on every attribute combination (108 forward, 54 backward)."""
    fwd = {k.static for k in FWD_SPEC.keys()}
    bwd = {k.static for k in BWD_SPEC.keys()}
    assert fwd == set(FWD_COMBOS)
    assert bwd == set(BWD_COMBOS)


def test_case_rows_cover_every_pair_of_attribute_values():
    """The matrices below run a covering array: every pair of (dtype, attribute) values at least once, the named
    cases kept, and the forward rows use the non-default eps too (_fwd_attrs)."""
    for rows, n in ((BWD_ROWS, 4), (FWD_ROWS, 5)):
        factors = {"dtype": DTYPES, **{a: sorted({c[k] for c in FWD_COMBOS}) for k, a in enumerate(ATTR_NAMES[:n])}}
        dicts = [dict(zip(factors, (d, *c))) for d, c in rows]
        assert not uncovered(dicts, factors)
        assert len(rows) < len(DTYPES) * len(BWD_COMBOS) / 4
    assert ("bfloat16", (2, 2, 2, 1)) in BWD_ROWS and ("bfloat16", (2, 2, 2, 1, True)) in FWD_ROWS
    assert {"eps" in _fwd_attrs(c) for _, c in FWD_ROWS} == {True, False}


def test_every_combination_once_exact_vs_oracle():
    """Every specialisation (108 forward, 54 backward attribute combinations), the dtype rotating, on one shape with
    both encoders: exact mode equals the float64 oracle to 1e-9 (the matrices run a covering array of them)."""
    for n, combo in enumerate(FWD_COMBOS):
        attrs, inputs = _fwd_case("s1", "both", combo, DTYPES[n % 3])
        out = interpret(FWD, inputs, attrs, mode="exact")
        _assert_exact(out, _fwd_gold(inputs, attrs), f"forward {_cid(combo)}")
    for n, combo in enumerate(BWD_COMBOS):
        attrs, inputs = _bwd_case("d34", "q_only", combo, DTYPES[n % 3])
        out = interpret(BWD, inputs, attrs, mode="exact")
        _assert_exact(out, norm_rope_concat_grad(**inputs, **attrs), f"backward {_cid(combo)}")
        _assert_absent_encoder_zeros(out, inputs, attrs, f"backward {_cid(combo)}")


# =====================================================================================
# 1. Backward, exact mode vs torch autograd oracles (§2, §2.1, §2.3)
# =====================================================================================

@pytest.mark.parametrize("dtype,combo", BWD_ROWS, ids=[_rid(r) for r in BWD_ROWS])
def test_backward_exact_vs_oracle_given_stats(dtype, combo):
    """§2: exact-mode NormRopeConcatGrad equals the autograd oracle at the provided stats to 1e-9."""
    for shape, enc in EXACT_CASES:
        attrs, inputs = _bwd_case(shape, enc, combo, dtype)
        out = interpret(BWD, inputs, attrs, mode="exact")
        gold = norm_rope_concat_grad(**inputs, **attrs)
        _assert_exact(out, gold, f"{shape}/{enc}")
        _assert_absent_encoder_zeros(out, inputs, attrs, f"{shape}/{enc}")


def _structured_rows(rng, shape):
    """Rows m + a*z (z a permutation of D/2 (+1) and D/2 (-1)): mean m, rstd 1/a exactly (eps 0), all
    values multiples of 1/4 below 4 in magnitude, hence exact in fp16/bf16/fp32."""
    lead, d = shape[:-1], shape[-1]
    z = rng.permuted(np.broadcast_to(np.tile([1.0, -1.0], d // 2), shape), axis=-1)
    m = rng.choice([-1.5, -0.75, 0.0, 0.25, 1.25], size=lead + (1,))
    a = rng.choice([0.25, 0.5, 1.0, 2.0], size=lead + (1,))
    return m + a * z, m, 1.0 / a


@pytest.mark.parametrize("dtype,combo", BWD_ROWS, ids=[_rid(r) for r in BWD_ROWS])
def test_backward_exact_vs_autograd_true_layernorm(dtype, combo):
    """§2 step 3: given the exact stats of x, exact mode equals LayerNorm autograd (stats from x, eps 0) to 1e-9."""
    nt, nat = combo[0], combo[1]
    for shape, enc in STRUCT_CASES:
        attrs, inputs = _bwd_case(shape, enc, combo, dtype)
        rng = np.random.default_rng(_seed("struct", shape, enc, combo, dtype))
        for part, prefix, t in (("query", "norm_query", nt), ("key", "norm_key", nt),
                                ("encoder_query", "norm_added_query", nat), ("encoder_key", "norm_added_key", nat)):
            if inputs.get(part) is None:
                continue
            x, m, r = _structured_rows(rng, inputs[part].shape)
            inputs[part] = x.astype(NP_DTYPE[dtype])
            if t >= 1:
                inputs[f"{prefix}_mean"] = m.astype(np.float32)
                inputs[f"{prefix}_rstd"] = r.astype(np.float32)
        out = interpret(BWD, inputs, attrs, mode="exact")
        ag_in = {k: v for k, v in inputs.items() if not (k.endswith("_mean") or k.endswith("_rstd"))}
        gold = norm_rope_concat_grad_autograd(**ag_in, **attrs, eps=0.0)
        stats = {k: gold.pop(k) for k in list(gold) if k.endswith("_mean") or k.endswith("_rstd")}
        for k, v in stats.items():     # the construction really gives the exact statistics
            np.testing.assert_array_equal(v, inputs[k].astype(np.float64), err_msg=f"{shape}/{enc} {k}")
        _assert_exact(out, gold, f"{shape}/{enc}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_backward_exact_vs_autograd_random_stats_from_x(dtype):
    """§2: with fp32-rounded true stats (eps 1e-5), exact mode is within stat rounding of LayerNorm autograd."""
    for combo in BWD_COMBOS:
        for shape, enc in (("s1", "both"), ("d34", "none")):
            attrs, inputs = _bwd_case(shape, enc, combo, dtype)
            out = interpret(BWD, inputs, attrs, mode="exact")
            ag_in = {k: v for k, v in inputs.items() if not (k.endswith("_mean") or k.endswith("_rstd"))}
            gold = norm_rope_concat_grad_autograd(**ag_in, **attrs, eps=1e-5)
            gold = {k: v for k, v in gold.items() if not (k.endswith("_mean") or k.endswith("_rstd"))}
            assert set(out) == set(gold)
            for k, g in gold.items():
                scale = float(np.abs(g).max())
                err = float(np.abs(out[k] - g).max())
                # stats enter as fp32 (relative error <= 2^-24 each); the gradient moves by O(1e-7) of its scale
                assert err <= 1e-5 * scale, f"{_cid(combo)} {shape}/{enc} {k}: {err:.3g} vs {scale:.3g}"


# =====================================================================================
# 2. Backward, device mode within CANN's precision standard (§1.4, §2 step 4)
# =====================================================================================

@pytest.mark.parametrize("dtype,combo", BWD_ROWS, ids=[_rid(r) for r in BWD_ROWS])
def test_backward_device_precision(dtype, combo):
    """§2/§1.4: device grads have the grad dtype (weights too) and meet CANN's limits vs the float64 oracle."""
    for shape, enc in BWD_DEVICE_CASES:
        attrs, inputs = _bwd_case(shape, enc, combo, dtype)
        out = interpret(BWD, inputs, attrs, mode="device")
        gold = norm_rope_concat_grad(**inputs, **attrs)
        _assert_device(out, gold, dtype, f"{shape}/{enc}")
        _assert_absent_encoder_zeros(out, inputs, attrs, f"{shape}/{enc}")


H16, HBF = 2.0**-11, 2.0**-8      # half an ulp at 1.0 (fp16, bf16)
TIE_DTYPES = [("float16", H16), ("bfloat16", HBF)]


def _tie_expect(h):
    """Exact values, their ties-away roundings and the ties-to-even roundings (which differ on 2 of 4)."""
    exact = np.array([1 + h, -1 - h, 1 + 3 * h, -1 - 3 * h])
    away = np.array([1 + 2 * h, -1 - 2 * h, 1 + 4 * h, -1 - 4 * h])
    even = np.array([1.0, -1.0, 1 + 4 * h, -1 - 4 * h])
    return exact, away, even


@pytest.mark.parametrize("dtype,h", TIE_DTYPES)
def test_forward_rope_exact_tie_rounds_away(dtype, h):
    """§1.4/§7.12: a RoPE output exactly halfway between two fp16/bf16 values rounds away from zero (CAST_ROUND)."""
    t = NP_DTYPE[dtype]
    x = np.array([1, 1, -1, -1, 1, 1, -1, -1], np.float64).reshape(1, 1, 1, 8)
    sin = np.array([[h, h, h, h, 3 * h, 3 * h, 3 * h, 3 * h]])
    inputs = dict(query=x.astype(t), key=x.astype(t), value=x.astype(t), rope_sin=sin.astype(t),
                  rope_cos=np.ones((1, 8)).astype(t))
    attrs = dict(norm_type=0, norm_added_type=0, rope_type=1, concat_order=0)
    exact, away, even = _tie_expect(h)
    assert not np.array_equal(away, even)
    # odd columns: x[2i+1]*c + x[2i]*s = the ties; even columns x[2i]*c - x[2i+1]*s are representable
    lo = np.array([1 - h, -1 + h, 1 - 3 * h, -1 + 3 * h])
    gold = norm_rope_concat_fwd(**inputs, **attrs)["query_output"].reshape(8)
    np.testing.assert_array_equal(gold[1::2], exact)
    ex = interpret(FWD, inputs, attrs, mode="exact")
    dev = interpret(FWD, inputs, attrs, mode="device")
    for k in ("query_output", "key_output"):
        np.testing.assert_array_equal(ex[k].reshape(8)[1::2], exact)
        assert dev[k].dtype == t
        got = dev[k].astype(np.float64).reshape(8)
        np.testing.assert_array_equal(got[1::2], away, err_msg=f"{k}: ties not rounded away")
        np.testing.assert_array_equal(got[0::2], lo)
    np.testing.assert_array_equal(dev["value_output"].astype(np.float64).reshape(8), x.reshape(8))


@pytest.mark.parametrize("dtype,h", TIE_DTYPES)
def test_backward_rope_adjoint_exact_tie_rounds_away(dtype, h):
    """§2 step 2/4: a RoPE-adjoint grad exactly halfway between two fp16/bf16 values is rounded away from zero."""
    t = NP_DTYPE[dtype]
    g = np.array([1, 1, -1, -1, 1, 1, -1, -1], np.float64).reshape(1, 1, 1, 8)
    sin = np.array([[h, h, h, h, 3 * h, 3 * h, 3 * h, 3 * h]])
    inputs = dict(grad_query_output=g.astype(t), grad_key_output=g.astype(t), grad_value_output=g.astype(t),
                  query=np.zeros((1, 1, 1, 8), t), key=np.zeros((1, 1, 1, 8), t),
                  rope_sin=sin.astype(t), rope_cos=np.ones((1, 8)).astype(t))
    attrs = dict(norm_type=0, norm_added_type=0, rope_type=1, concat_order=0)
    exact, away, even = _tie_expect(h)
    # even columns: d[2i] = g[2i]*c + g[2i+1]*s = the ties; odd: g[2i+1]*c - g[2i]*s representable
    lo = np.array([1 - h, -1 + h, 1 - 3 * h, -1 + 3 * h])
    gold = norm_rope_concat_grad(**inputs, **attrs)["grad_query"].reshape(8)
    np.testing.assert_array_equal(gold[0::2], exact)
    ex = interpret(BWD, inputs, attrs, mode="exact")
    dev = interpret(BWD, inputs, attrs, mode="device")
    for k in ("grad_query", "grad_key"):
        np.testing.assert_array_equal(ex[k].reshape(8)[0::2], exact)
        assert dev[k].dtype == t
        got = dev[k].astype(np.float64).reshape(8)
        np.testing.assert_array_equal(got[0::2], away, err_msg=f"{k}: ties not rounded away")
        np.testing.assert_array_equal(got[1::2], lo)


@pytest.mark.parametrize("dtype,h", TIE_DTYPES)
def test_backward_bias_grad_sum_exact_tie_rounds_away(dtype, h):
    """§2 step 3/§4.5: a bias grad (row sum) exactly halfway between two fp16/bf16 values rounds away from zero."""
    t = NP_DTYPE[dtype]
    g = np.zeros((1, 1, 2, 4))                                  # [B, N, Sq, D]; rope_type 0
    g[0, 0, 0] = [1, -1, 1, -1]
    g[0, 0, 1] = [h, -h, 3 * h, -3 * h]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 2, 1, 4)).astype(t)
    inputs = dict(grad_query_output=g.astype(t), grad_key_output=g.astype(t), grad_value_output=g.astype(t),
                  query=x, key=x, norm_query_weight=np.ones(4, t), norm_key_weight=np.ones(4, t),
                  norm_query_mean=np.zeros((1, 2, 1, 1), np.float32), norm_query_rstd=np.ones((1, 2, 1, 1), np.float32),
                  norm_key_mean=np.zeros((1, 2, 1, 1), np.float32), norm_key_rstd=np.ones((1, 2, 1, 1), np.float32),
                  rope_sin=np.zeros((1, 4), t), rope_cos=np.ones((1, 4), t))
    attrs = dict(norm_type=2, norm_added_type=0, rope_type=0, concat_order=0)
    exact, away, even = _tie_expect(h)
    gold = norm_rope_concat_grad(**inputs, **attrs)      # columns: 1+h, -1-h, 1+3h, -1-3h
    np.testing.assert_array_equal(gold["grad_norm_query_bias"], exact)
    dev = interpret(BWD, inputs, attrs, mode="device")
    for k in ("grad_norm_query_bias", "grad_norm_key_bias"):
        assert dev[k].dtype == t
        np.testing.assert_array_equal(dev[k].astype(np.float64), away, err_msg=f"{k}: ties not rounded away")


# =====================================================================================
# 3. Forward vs oracle (§1.1-1.5)
# =====================================================================================

@pytest.mark.parametrize("dtype,combo", FWD_ROWS, ids=[_rid(r) for r in FWD_ROWS])
def test_forward_exact_vs_oracle(dtype, combo):
    """§1: exact-mode NormRopeConcat equals the float64 oracle to 1e-9; stats exist iff is_training and type 1/2."""
    for shape, enc in EXACT_CASES:
        attrs, inputs = _fwd_case(shape, enc, combo, dtype)
        out = interpret(FWD, inputs, attrs, mode="exact")
        _assert_exact(out, _fwd_gold(inputs, attrs), f"{shape}/{enc}")


@pytest.mark.parametrize("dtype,combo", FWD_ROWS, ids=[_rid(r) for r in FWD_ROWS])
def test_forward_device_precision(dtype, combo):
    """§1.4/§1.5: device outputs in dtype T (stats fp32) meet CANN's limits vs the float64 oracle."""
    for shape, enc in FWD_DEVICE_CASES:
        attrs, inputs = _fwd_case(shape, enc, combo, dtype)
        out = interpret(FWD, inputs, attrs, mode="device")
        _assert_device(out, _fwd_gold(inputs, attrs), dtype, f"{shape}/{enc}")


def test_forward_stats_presence_rule():
    """§1.5: mean/rstd outputs are produced exactly for the normalised, present streams when is_training."""
    for combo in FWD_COMBOS:
        for enc in ENCODERS:
            attrs, inputs = _fwd_case("s1", enc, combo, "float32")
            out = interpret(FWD, inputs, attrs, mode="device")
            has_q, has_k = ENCODERS[enc]
            want = {"query_output", "key_output", "value_output"}
            if attrs["is_training"]:
                for p, t, present in (("norm_query", combo[0], True), ("norm_key", combo[0], True),
                                      ("norm_added_query", combo[1], has_q), ("norm_added_key", combo[1], has_k)):
                    if t in (1, 2) and present:
                        want |= {f"{p}_mean", f"{p}_rstd"}
            assert set(out) == want, f"{_cid(combo)}/{enc}"


# =====================================================================================
# 4. Reference examples (§6.1, §6.2)
# =====================================================================================

def _example_61():
    """Inputs of the forward example of §6.1 (fp32 constants)."""
    f = np.float32
    full = lambda s, v: np.full(s, v, f)  # noqa: E731
    q, e = (1, 5, 10, 6), (1, 3, 10, 6)
    inputs = dict(query=full(q, 0), key=full(q, 0), value=full(q, 0), encoder_query=full(e, 4),
                  encoder_key=full(e, 5), encoder_value=full(e, 6),
                  norm_query_weight=full(6, 1), norm_query_bias=full(6, 2), norm_key_weight=full(6, 3),
                  norm_key_bias=full(6, 4), norm_added_query_weight=full(6, 5), norm_added_query_bias=full(6, 6),
                  norm_added_key_weight=full(6, 7), norm_added_key_bias=full(6, 8),
                  rope_sin=full((5, 6), 9), rope_cos=full((5, 6), 10))
    attrs = dict(norm_type=2, norm_added_type=2, rope_type=1, concat_order=0, eps=1e-5, is_training=False)
    rows = lambda head, tail: np.array([head] * 5 + [tail] * 3, np.float64)  # noqa: E731
    expect = {"query_output": rows([2, 38] * 3, [6] * 6), "key_output": rows([4, 76] * 3, [8] * 6),
              "value_output": rows([0] * 6, [6] * 6)}
    return inputs, attrs, {k: np.broadcast_to(v, (1, 10, 8, 6)) for k, v in expect.items()}


@pytest.mark.parametrize("mode", ["exact", "device"])
def test_reference_example_forward_61(mode):
    """§6.1: the aclnnNormRopeConcat example gives rows [2,38,..]/6, [4,76,..]/8, 0/6 in shapes [1,10,8,6] (fp32)."""
    inputs, attrs, expect = _example_61()
    out = interpret(FWD, inputs, attrs, mode=mode)
    assert set(out) == set(expect)
    for k, v in expect.items():
        assert out[k].shape == (1, 10, 8, 6)
        if mode == "exact":
            np.testing.assert_allclose(out[k], v, rtol=1e-12, atol=1e-12, err_msg=k)
        else:
            assert out[k].dtype == np.float32
            _cann_check(out[k], v, "float32", k)


def _example_62():
    """Inputs of the backward example of §6.2 (fp32 constants) and its expected outputs."""
    f = np.float32
    ones = lambda *s: np.ones(s, f)  # noqa: E731
    zeros = lambda *s: np.zeros(s, f)  # noqa: E731
    inputs = dict(grad_query_output=ones(1, 10, 8, 6), grad_key_output=ones(1, 10, 8, 6),
                  grad_value_output=ones(1, 10, 8, 6), query=ones(1, 5, 10, 6), key=ones(1, 5, 10, 6),
                  encoder_query=ones(1, 3, 10, 6), encoder_key=ones(1, 3, 10, 6),
                  norm_query_weight=ones(6), norm_query_mean=zeros(1, 5, 10, 1), norm_query_rstd=ones(1, 5, 10, 1),
                  norm_key_weight=ones(6), norm_key_mean=zeros(1, 5, 10, 1), norm_key_rstd=ones(1, 5, 10, 1),
                  norm_added_query_weight=ones(6), norm_added_query_mean=ones(1, 3, 10, 1),
                  norm_added_query_rstd=ones(1, 3, 10, 1),
                  norm_added_key_weight=ones(6), norm_added_key_mean=zeros(1, 3, 10, 1),
                  norm_added_key_rstd=ones(1, 3, 10, 1),
                  rope_sin=ones(5, 6), rope_cos=ones(5, 6))
    attrs = dict(norm_type=2, norm_added_type=2, rope_type=1, concat_order=0)
    b = lambda v, s: np.broadcast_to(np.asarray(v, np.float64), s)  # noqa: E731
    wq = [100, 0, 100, 0, 100, 0]
    expect = {"grad_query": b([0, -2] * 3, (1, 5, 10, 6)), "grad_key": b([0, -2] * 3, (1, 5, 10, 6)),
              "grad_value": b(1, (1, 5, 10, 6)), "grad_encoder_query": b(0, (1, 3, 10, 6)),
              "grad_encoder_key": b(-1, (1, 3, 10, 6)), "grad_encoder_value": b(1, (1, 3, 10, 6)),
              "grad_norm_query_weight": b(wq, (6,)), "grad_norm_query_bias": b(wq, (6,)),
              "grad_norm_key_weight": b(wq, (6,)), "grad_norm_key_bias": b(wq, (6,)),
              "grad_norm_added_query_weight": b(0, (6,)), "grad_norm_added_query_bias": b(30, (6,)),
              "grad_norm_added_key_weight": b(30, (6,)), "grad_norm_added_key_bias": b(30, (6,))}
    return inputs, attrs, expect


@pytest.mark.parametrize("mode", ["exact", "device"])
def test_reference_example_backward_62(mode):
    """§6.2: the backward example gives gradQuery [0,-2,..], weight/bias grads [100,0,..], 30, etc. (fp32)."""
    inputs, attrs, expect = _example_62()
    out = interpret(BWD, inputs, attrs, mode=mode)
    assert set(out) == set(expect)
    for k, v in expect.items():
        assert out[k].shape == v.shape, k
        # every expected value is a small integer; both modes must hit it exactly (fp32 arithmetic on integers)
        np.testing.assert_array_equal(out[k].astype(np.float64), v, err_msg=f"{mode} {k}")
        if mode == "device":
            assert out[k].dtype == np.float32


# =====================================================================================
# 5. Forward -> backward chain in device mode (§1.2 training stats feed §2 step 3)
# =====================================================================================

@pytest.mark.parametrize("dtype", DTYPES)
def test_chain_forward_stats_into_backward_device(dtype):
    """§1.2/§2: device forward fp32 mean/rstd fed to the device backward meet CANN's limits vs float64 autograd."""
    worst = {}
    for combo in BWD_COMBOS:
        for shape, enc in (("s1", "both"), ("d64r1", "none")):
            attrs = _bwd_attrs(combo)
            fattrs = dict(attrs, is_training=True, eps=1e-5)
            dims = _dims(shape, enc)
            seed = _seed("chain", shape, enc, combo, dtype)
            fin = random_inputs(FWD_SPEC, dims, fattrs, {"T": dtype}, seed)
            fwd = interpret(FWD, fin, fattrs, mode="device")
            grads = _bwd_inputs(dims, attrs, dtype, seed + 1)
            bin_ = {k: grads[k] for k in ("grad_query_output", "grad_key_output", "grad_value_output")}
            for k in ("query", "key", "encoder_query", "encoder_key", "rope_sin", "rope_cos",
                      "norm_query_weight", "norm_key_weight", "norm_added_query_weight", "norm_added_key_weight"):
                if fin.get(k) is not None:
                    bin_[k] = fin[k]
            bin_.update({k: v for k, v in fwd.items() if k.endswith("_mean") or k.endswith("_rstd")})
            out = interpret(BWD, bin_, attrs, mode="device")
            ag_in = {k: v for k, v in bin_.items() if not (k.endswith("_mean") or k.endswith("_rstd"))}
            gold = norm_rope_concat_grad_autograd(**ag_in, **attrs, eps=1e-5)
            gstats = {k: gold.pop(k) for k in list(gold) if k.endswith("_mean") or k.endswith("_rstd")}
            for k, g in gstats.items():
                _cann_check(fwd[k], g, "float32", f"forward {k}")
            assert set(out) == set(gold)
            for k, g in gold.items():
                mere, mare = mere_mare(out[k], g)
                w = worst.setdefault(k, [0.0, 0.0])
                w[0], w[1] = max(w[0], mere), max(w[1], mare)
                _cann_check(out[k], g, dtype, f"{_cid(combo)} {shape}/{enc} {k}")
    print(f"\nchain {dtype}: worst MERE / MARE per output")
    for k, (a, b) in sorted(worst.items()):
        print(f"  {k:32s} {a:.3e} {b:.3e}")


def test_cli_backward_dims_without_encoders(tmp_path):
    """§2.3: `opgen interpret NormRopeConcatGrad --dims` without Seq/Sek (null encoders) succeeds."""
    out_p = tmp_path / "o.npz"
    res = cli("interpret", BWD, "--dims", "B=1,Sq=4,Sk=3,N=2,D=8,R=3", "--attr", "norm_type=1", "--attr",
              "rope_type=1", "--out", out_p, "-q")
    assert res.returncode == 0, res.stderr
    with np.load(out_p) as z:
        assert set(z.files) == {"grad_query", "grad_key", "grad_value"}
        assert z["grad_query"].shape == (1, 4, 2, 8) and z["grad_key"].shape == (1, 3, 2, 8)


# =====================================================================================
# 6. README case through the CLI
# =====================================================================================

BIG_DIMS = "B=1,Sq=4096,Seq=512,Sk=4096,Sek=512,N=24,D=128,R=4608"
BIG_ATTRS = dict(norm_type=2, norm_added_type=2, rope_type=2, concat_order=1)


@pytest.mark.slow
def test_cli_readme_case_big(tmp_path):
    """README case via the CLI: exit 0, float32 arrays of the right shapes holding bf16 values, matching the oracle."""
    out_p, in_p = tmp_path / "out.npz", tmp_path / "in.npz"
    cmd = ["interpret", BWD, "--dims", BIG_DIMS, "--dtype", "T=bfloat16", "--out", str(out_p), "--save-inputs",
           str(in_p), "-q"]
    for k, v in BIG_ATTRS.items():
        cmd += ["--attr", f"{k}={v}"]
    t0 = time.time()
    res = cli(*cmd)
    elapsed = time.time() - t0
    assert res.returncode == 0, res.stderr
    print(f"\nCLI README case: {elapsed:.1f} s")
    B, Sq, Seq, Sk, Sek, N, D = 1, 4096, 512, 4096, 512, 24, 128
    shapes = {"grad_query": (B, Sq, N, D), "grad_key": (B, Sk, N, D), "grad_value": (B, Sk, N, D),
              "grad_encoder_query": (B, Seq, N, D), "grad_encoder_key": (B, Sek, N, D),
              "grad_encoder_value": (B, Sek, N, D)}
    for p in ("norm_query", "norm_key", "norm_added_query", "norm_added_key"):
        shapes[f"grad_{p}_weight"] = shapes[f"grad_{p}_bias"] = (D,)
    with np.load(out_p) as z:
        out = {k: z[k] for k in z.files}
    assert set(out) == set(shapes)
    for k, s in shapes.items():
        assert out[k].dtype == np.float32 and out[k].shape == s, (k, out[k].dtype, out[k].shape)
        # device results were rounded to bf16 before being written as float32
        np.testing.assert_array_equal(out[k].astype(ml_dtypes.bfloat16).astype(np.float32), out[k], err_msg=k)
    with np.load(in_p) as z:
        inp = {k: z[k] for k in z.files if k != "_opgen_dtypes"}   # not the recorded dtype binding
    # the op is separable over heads: data grads of a head depend on that head only; weight/bias grads are
    # sums over heads -> oracle over head chunks (all 24 heads), data grads compared on every head
    acc = {}
    for h0 in range(0, N, 8):
        hs = slice(h0, h0 + 8)
        sl = {k: (v[:, hs] if k.startswith("grad_") else v[:, :, hs] if v.ndim == 4 else v) for k, v in inp.items()}
        gold = norm_rope_concat_grad(**sl, **BIG_ATTRS)
        for k, g in gold.items():
            if g.ndim == 4:
                _cann_check(out[k][:, :, hs], g, "bfloat16", f"{k} heads {h0}..{h0 + 7}")
            else:
                acc[k] = acc.get(k, 0) + g
        del gold, sl
    for k, g in acc.items():
        _cann_check(out[k], g, "bfloat16", k)
