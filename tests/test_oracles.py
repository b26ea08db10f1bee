"""Self-tests of the float64 torch oracles in tests/oracles.py.

What is checked:
* fixed examples from the reference notes (docs/reference/ada_layer_norm.md 5.1, docs/reference/norm_rope_concat.md 6.1 / 6.2);
* every backward oracle against central finite differences of its own forward (float64, tiny shapes);
* "statistics as input" oracles against plain autograd with recomputed statistics (true stats);
* the autograd oracles against closed-form backward formulas written independently here
  (LayerNorm backward, RoPE adjoint, NSA backward of docs/reference/nsa_selected_attention.md 2.5), including
  statistics that are NOT the true statistics of x.
"""

import itertools

import ml_dtypes
import numpy as np
import pytest
import torch

try:  # works both with and without a tests/__init__.py
    from tests import oracles as O
except ImportError:  # pragma: no cover
    import oracles as O


def _rng(seed):
    """Seeded numpy generator."""
    return np.random.default_rng(seed)


def _fd_grad(loss, arrays, name, h=1e-6):
    """Central finite-difference gradient of scalar loss(arrays) w.r.t. arrays[name] (float64)."""
    base = arrays[name]
    grad = np.zeros_like(base)
    for idx in np.ndindex(base.shape):
        saved = base[idx]
        base[idx] = saved + h
        up = loss(arrays)
        base[idx] = saved - h
        down = loss(arrays)
        base[idx] = saved
        grad[idx] = (up - down) / (2 * h)
    return grad


def _close(a, b, tol=1e-10):
    """Same shape and |a - b| <= tol * max(1, max|b|)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    scale = max(1.0, float(np.max(np.abs(b))) if b.size else 1.0)
    np.testing.assert_allclose(a, b, rtol=0, atol=tol * scale)


# =====================================================================================
# AdaLayerNorm
# =====================================================================================

def _ada_closed_form(dy, x, rstd, mean, scale, gamma, beta):
    """docs/reference/ada_layer_norm.md 1.2 table written directly (numpy float64), scale in [*Bd,1,H] form."""
    h = x.shape[-1]
    z = (x - mean) * rstd
    sp = 1.0 + scale
    g = dy * gamma * sp
    pd_x = rstd * (g - g.sum(-1, keepdims=True) / h - z * (g * z).sum(-1, keepdims=True) / h)
    lead = tuple(range(x.ndim - 1))
    return {"pd_x": pd_x,
            "pd_scale": (dy * (z * gamma + beta)).sum(-2, keepdims=True),
            "pd_shift": dy.sum(-2, keepdims=True),
            "pd_gamma": (dy * sp * z).sum(lead),
            "pd_beta": (dy * sp).sum(lead)}


def test_ada_forward_example_5_1():
    """docs/reference/ada_layer_norm.md 5.1 forward example: all-ones input -> out 3, mean 1, rstd 1/sqrt(eps)."""
    x = np.ones((2, 4, 8), np.float32)
    res = O.ada_layer_norm_v2_fwd(x, np.ones((2, 8)), np.ones((2, 8)), np.ones(8), np.ones(8), 1e-5)
    assert set(res) == {"out", "mean", "rstd"}
    _close(res["out"], np.full((2, 4, 8), 3.0), 0)
    _close(res["mean"], np.ones((2, 4, 1)), 0)
    _close(res["rstd"], np.full((2, 4, 1), 1 / np.sqrt(1e-5)), 1e-15)


def test_ada_backward_example_5_1():
    """docs/reference/ada_layer_norm.md 5.1 backward example (stats deliberately not those of x)."""
    x = np.array([[2, 3], [4, 5]] * 2, np.float32).reshape(2, 2, 2)
    mean = np.array([2, 3, 4, 5], np.float32).reshape(2, 2, 1)
    rstd = np.array([4, 5, 6, 7], np.float32).reshape(2, 2, 1)
    scale = np.array([[1, 1], [2, 2]], np.float32)
    res = O.ada_layer_norm_grad(x, x, rstd, mean, scale, np.ones(2, np.float32), np.zeros(2, np.float32))
    expected = {"pd_x": [-4, -188, -1755, -3495, -4545, -2259, -2068.5, 10.5],
                "pd_scale": [20, 62, -52, -18], "pd_shift": [6, 8, 6, 8],
                "pd_gamma": [-116, 70], "pd_beta": [30, 40]}
    shapes = {"pd_x": (2, 2, 2), "pd_scale": (2, 2), "pd_shift": (2, 2), "pd_gamma": (2,), "pd_beta": (2,)}
    assert set(res) == set(expected)
    for k, v in expected.items():
        assert res[k].shape == shapes[k] and res[k].dtype == np.float64
        _close(res[k].ravel(), np.array(v, np.float64), 1e-13)
    # absent gamma/beta -> ones/zeros
    res2 = O.ada_layer_norm_grad(x, x, rstd, mean, scale)
    for k in expected:
        _close(res2[k], res[k], 0)


ADA_CASES = [  # (x shape, scale shape, shift shape, with weight, with bias)
    ((3, 5), (5,), (1, 5), True, True),
    ((2, 3, 4), (2, 4), (2, 1, 4), True, False),
    ((2, 1, 3, 6), (2, 1, 1, 6), (2, 1, 6), False, True),
    ((1, 2, 1, 2, 3, 4), (1, 2, 1, 2, 4), (1, 2, 1, 2, 1, 4), False, False),
]


@pytest.mark.parametrize("xs,ss,hs,has_w,has_b", ADA_CASES)
def test_ada_grad_matches_closed_form_at_arbitrary_stats(xs, ss, hs, has_w, has_b):
    """Straight-through autograd == 1.2 formulas for arbitrary given mean/rstd."""
    r = _rng(1)
    x, dy = r.normal(size=xs), r.normal(size=xs)
    mean = r.normal(size=xs[:-1] + (1,))
    rstd = r.uniform(0.5, 3.0, size=xs[:-1] + (1,))  # deliberately not the statistics of x
    scale = r.normal(size=ss)
    gamma = r.normal(size=xs[-1]) if has_w else None
    beta = r.normal(size=xs[-1]) if has_b else None
    res = O.ada_layer_norm_grad(dy, x, rstd, mean, scale, gamma, beta)
    sc = scale.reshape(xs[:-2] + (1, xs[-1]))
    ref = _ada_closed_form(dy, x, rstd, mean, sc,
                           np.ones(xs[-1]) if gamma is None else gamma,
                           np.zeros(xs[-1]) if beta is None else beta)
    for k in ("pd_x", "pd_gamma", "pd_beta"):
        _close(res[k], ref[k])
    for k in ("pd_scale", "pd_shift"):
        assert res[k].shape == tuple(ss)
        _close(res[k], ref[k].reshape(ss))


@pytest.mark.parametrize("xs,ss,hs,has_w,has_b", ADA_CASES)
def test_ada_stats_as_input_equals_autograd(xs, ss, hs, has_w, has_b):
    """Given true stats, the provided-stats oracle equals plain autograd (1e-10)."""
    r = _rng(2)
    x, dy, scale = r.normal(size=xs), r.normal(size=xs), r.normal(size=ss)
    gamma = r.normal(size=xs[-1]) if has_w else None
    beta = r.normal(size=xs[-1]) if has_b else None
    auto = O.ada_layer_norm_grad_autograd(dy, x, scale, gamma, beta, 1e-5)
    fwd = O.ada_layer_norm_v2_fwd(x, scale, r.normal(size=hs), gamma, beta, 1e-5)
    _close(auto["mean"], fwd["mean"], 0)
    _close(auto["rstd"], fwd["rstd"], 0)
    given = O.ada_layer_norm_grad(dy, x, auto["rstd"], auto["mean"], scale, gamma, beta)
    for k in ("pd_x", "pd_scale", "pd_shift", "pd_gamma", "pd_beta"):
        _close(given[k], auto[k], 1e-10)


@pytest.mark.parametrize("xs,ss,hs,has_w,has_b", ADA_CASES[:3])
def test_ada_grad_finite_differences(xs, ss, hs, has_w, has_b):
    """Backward oracle vs central differences of the forward oracle."""
    r = _rng(3)
    h = xs[-1]
    arrs = {"x": r.normal(size=xs), "scale": r.normal(size=ss), "shift": r.normal(size=hs),
            "weight": r.normal(size=h), "bias": r.normal(size=h)}
    dy = r.normal(size=xs)

    def loss(a):
        """Scalar <output, fixed output-gradient> used for finite differences."""
        out = O.ada_layer_norm_v2_fwd(a["x"], a["scale"], a["shift"],
                                      a["weight"] if has_w else None, a["bias"] if has_b else None)["out"]
        return float((out * dy).sum())

    fwd = O.ada_layer_norm_v2_fwd(arrs["x"], arrs["scale"], arrs["shift"],
                                  arrs["weight"] if has_w else None, arrs["bias"] if has_b else None)
    res = O.ada_layer_norm_grad(dy, arrs["x"], fwd["rstd"], fwd["mean"], arrs["scale"],
                                arrs["weight"] if has_w else None, arrs["bias"] if has_b else None)
    _close(res["pd_x"], _fd_grad(loss, arrs, "x"), 1e-7)
    _close(res["pd_scale"], _fd_grad(loss, arrs, "scale"), 1e-7)
    _close(res["pd_shift"].ravel(), _fd_grad(loss, arrs, "shift").ravel(), 1e-7)
    if has_w:
        _close(res["pd_gamma"], _fd_grad(loss, arrs, "weight"), 1e-7)
    if has_b:
        _close(res["pd_beta"], _fd_grad(loss, arrs, "bias"), 1e-7)


def test_ada_accepts_half_precision_and_rejects_bad_shapes():
    """bf16/fp16 inputs are widened exactly; invalid scale forms raise."""
    r = _rng(4)
    x = r.normal(size=(2, 3, 8)).astype(ml_dtypes.bfloat16)
    sc = r.normal(size=(2, 8)).astype(np.float16)
    sh = r.normal(size=(2, 1, 8)).astype(ml_dtypes.bfloat16)
    res = O.ada_layer_norm_v2_fwd(x, sc, sh)
    ref = O.ada_layer_norm_v2_fwd(x.astype(np.float64), sc.astype(np.float64), sh.astype(np.float64))
    for k in res:
        assert res[k].dtype == np.float64
        _close(res[k], ref[k], 0)
    with pytest.raises(ValueError):
        O.ada_layer_norm_v2_fwd(x, np.zeros((3, 8)), sh)
    with pytest.raises(ValueError):
        O.ada_layer_norm_v2_fwd(x, np.zeros((2, 1, 1, 8)), sh)


# =====================================================================================
# NormRopeConcat
# =====================================================================================

def _rope_perm_sign(d, mode):
    """R(x)[i] = sign[i] * x[perm[i]]; perm is an involution so R^T(g) = (sign * g)[perm]."""
    idx = np.arange(d)
    if mode == 1:
        perm = idx ^ 1
        sign = np.where(idx % 2 == 0, -1.0, 1.0)
    else:
        h = d // 2
        perm = (idx + h) % d
        sign = np.where(idx < h, -1.0, 1.0)
    return perm, sign


def _nrc_closed_form(gq, gk, gv, x, w, st, sin, cos, nt, nat, rt, order):
    """Independent numpy closed form of the backward (docs/reference/norm_rope_concat.md 2): RoPE adjoint, transpose
    back, split, LayerNorm backward at the given stats. x/w/st: dicts keyed q, k, aq, ak."""
    d = gq.shape[-1]
    res = {}
    for stream, gout, main, enc in (("q", gq, "q", "aq"), ("k", gk, "k", "ak")):
        g = gout.copy()
        if rt:
            perm, sign = _rope_perm_sign(d, rt)
            rows = min(sin.shape[0], g.shape[2])
            gh = g[:, :, :rows]
            g[:, :, :rows] = gh * cos[:rows] + (sign * gh * sin[:rows])[..., perm]
        g = g.transpose(0, 2, 1, 3)
        s_main = x[main].shape[1]
        s_enc = 0 if x.get(enc) is None else x[enc].shape[1]
        pieces = {main: g[:, :s_main] if order == 0 else g[:, s_enc:],
                  enc: g[:, s_main:] if order == 0 else g[:, :s_enc]}
        for p in (main, enc):
            if x.get(p) is None:
                continue
            t = nt if p in ("q", "k") else nat
            dd = pieces[p]
            if t == 0:
                res[p] = dd
                continue
            mean, rstd = st[p]
            xh = (x[p] - mean) * rstd
            gg = dd * w[p] if t == 2 else dd
            res[p] = rstd * (gg - gg.mean(-1, keepdims=True) - xh * (gg * xh).mean(-1, keepdims=True))
            if t == 2:
                res[p + "_w"] = (dd * xh).sum((0, 1, 2))
                res[p + "_b"] = dd.sum((0, 1, 2))
    gvt = gv.transpose(0, 2, 1, 3)
    sk = x["k"].shape[1]
    sek = 0 if x.get("ak") is None else x["ak"].shape[1]
    res["v"] = gvt[:, :sk] if order == 0 else gvt[:, sek:]
    res["av"] = gvt[:, sk:] if order == 0 else gvt[:, :sek]
    return res


NAMES = {"q": "norm_query", "k": "norm_key", "aq": "norm_added_query", "ak": "norm_added_key"}
OUT_NAMES = {"q": "grad_query", "k": "grad_key", "aq": "grad_encoder_query", "ak": "grad_encoder_key",
             "v": "grad_value", "av": "grad_encoder_value"}


def _nrc_inputs(seed, d=6, with_enc=True, B=2, N=3, Sq=3, Sk=2, Seq=2, Sek=3, R=4):
    """Random NormRopeConcat inputs (dicts keyed q/k/v/aq/ak/av), tables [R, D] and output grads."""
    r = _rng(seed)
    x = {"q": r.normal(size=(B, Sq, N, d)), "k": r.normal(size=(B, Sk, N, d)),
         "v": r.normal(size=(B, Sk, N, d)),
         "aq": r.normal(size=(B, Seq, N, d)) if with_enc else None,
         "ak": r.normal(size=(B, Sek, N, d)) if with_enc else None,
         "av": r.normal(size=(B, Sek, N, d)) if with_enc else None}
    w = {p: r.normal(size=d) for p in ("q", "k", "aq", "ak")}
    b = {p: r.normal(size=d) for p in ("q", "k", "aq", "ak")}
    sin, cos = r.normal(size=(R, d)), r.normal(size=(R, d))
    sq_t = Sq + (Seq if with_enc else 0)
    sk_t = Sk + (Sek if with_enc else 0)
    g = {"q": r.normal(size=(B, N, sq_t, d)), "k": r.normal(size=(B, N, sk_t, d)),
         "v": r.normal(size=(B, N, sk_t, d))}
    return x, w, b, sin, cos, g


def _fwd(x, w, b, sin, cos, nt, nat, rt, order, eps=1e-5):
    """norm_rope_concat_fwd on the dict-shaped test inputs."""
    return O.norm_rope_concat_fwd(
        x["q"], x["k"], x["v"], x["aq"], x["ak"], x["av"],
        w["q"], b["q"], w["k"], b["k"], w["aq"], b["aq"], w["ak"], b["ak"], sin, cos,
        norm_type=nt, norm_added_type=nat, rope_type=rt, concat_order=order, eps=eps)


def _grad(g, x, w, st, sin, cos, nt, nat, rt, order):
    """norm_rope_concat_grad on the dict-shaped test inputs; st: part -> (mean, rstd)."""
    def s(p, i):
        """i-th provided statistic of part p (None when absent)."""
        return st.get(p, (None, None))[i]
    return O.norm_rope_concat_grad(
        g["q"], g["k"], g["v"], x["q"], x["k"], x["aq"], x["ak"],
        w["q"], s("q", 0), s("q", 1), w["k"], s("k", 0), s("k", 1),
        w["aq"], s("aq", 0), s("aq", 1), w["ak"], s("ak", 0), s("ak", 1), sin, cos,
        norm_type=nt, norm_added_type=nat, rope_type=rt, concat_order=order)


def test_nrc_forward_example_6_1():
    """docs/reference/norm_rope_concat.md 6.1 forward example values and stat shapes."""
    B, N, D, S, Se = 1, 10, 6, 5, 3
    full = lambda shape, v: np.full(shape, v, np.float32)  # noqa: E731
    res = O.norm_rope_concat_fwd(
        full((B, S, N, D), 0), full((B, S, N, D), 0), full((B, S, N, D), 0),
        full((B, Se, N, D), 4), full((B, Se, N, D), 5), full((B, Se, N, D), 6),
        full(D, 1), full(D, 2), full(D, 3), full(D, 4), full(D, 5), full(D, 6), full(D, 7), full(D, 8),
        full((5, D), 9), full((5, D), 10),
        norm_type=2, norm_added_type=2, rope_type=1, concat_order=0, eps=1e-5)
    for name, head, tail in (("query_output", [2, 38] * 3, 6), ("key_output", [4, 76] * 3, 8),
                             ("value_output", [0] * 6, 6)):
        out = res[name]
        assert out.shape == (B, N, S + Se, D)
        _close(out[:, :, :S], np.broadcast_to(np.array(head, np.float64), (B, N, S, D)), 1e-12)
        _close(out[:, :, S:], np.full((B, N, Se, D), float(tail)), 1e-12)
    for p, s in (("query", S), ("key", S), ("added_query", Se), ("added_key", Se)):
        assert res[f"norm_{p}_mean"].shape == (B, s, N, 1)
        assert res[f"norm_{p}_rstd"].shape == (B, s, N, 1)


def test_nrc_backward_example_6_2():
    """docs/reference/norm_rope_concat.md 6.2 backward example values."""
    B, N, D, S, Se = 1, 10, 6, 5, 3
    ones = lambda *shape: np.ones(shape, np.float32)  # noqa: E731
    zeros = lambda *shape: np.zeros(shape, np.float32)  # noqa: E731
    res = O.norm_rope_concat_grad(
        ones(B, N, S + Se, D), ones(B, N, S + Se, D), ones(B, N, S + Se, D),
        ones(B, S, N, D), ones(B, S, N, D), ones(B, Se, N, D), ones(B, Se, N, D),
        ones(D), zeros(B, S, N, 1), ones(B, S, N, 1),
        ones(D), zeros(B, S, N, 1), ones(B, S, N, 1),
        ones(D), ones(B, Se, N, 1), ones(B, Se, N, 1),
        ones(D), zeros(B, Se, N, 1), ones(B, Se, N, 1),
        ones(5, D), ones(5, D),
        norm_type=2, norm_added_type=2, rope_type=1, concat_order=0)
    row = np.array([0, -2, 0, -2, 0, -2], np.float64)
    wsum = np.array([100, 0, 100, 0, 100, 0], np.float64)
    expected = {
        "grad_query": np.broadcast_to(row, (B, S, N, D)), "grad_key": np.broadcast_to(row, (B, S, N, D)),
        "grad_value": np.ones((B, S, N, D)),
        "grad_encoder_query": np.zeros((B, Se, N, D)), "grad_encoder_key": -np.ones((B, Se, N, D)),
        "grad_encoder_value": np.ones((B, Se, N, D)),
        "grad_norm_query_weight": wsum, "grad_norm_query_bias": wsum,
        "grad_norm_key_weight": wsum, "grad_norm_key_bias": wsum,
        "grad_norm_added_query_weight": np.zeros(D), "grad_norm_added_query_bias": np.full(D, 30.0),
        "grad_norm_added_key_weight": np.full(D, 30.0), "grad_norm_added_key_bias": np.full(D, 30.0),
    }
    assert set(res) == set(expected)
    for k, v in expected.items():
        _close(res[k], v, 1e-13)


def test_nrc_rope_formulas_elementwise():
    """docs/reference/norm_rope_concat.md 1.3 formulas, element by element, with norm off and R < S."""
    r = _rng(5)
    B, S, N, D, R = 1, 4, 2, 6, 3
    q = r.normal(size=(B, S, N, D))
    sin, cos = r.normal(size=(R, D)), r.normal(size=(R, D))
    h = D // 2
    for mode in (1, 2):
        out = O.norm_rope_concat_fwd(q, q, q, rope_sin=sin, rope_cos=cos, rope_type=mode)["query_output"]
        exp = q.transpose(0, 2, 1, 3).copy()
        for b, n, p in itertools.product(range(B), range(N), range(R)):
            x, c, s = q[b, p, n], cos[p], sin[p]
            for i in range(D // 2):
                if mode == 1:
                    a, bb = 2 * i, 2 * i + 1
                else:
                    a, bb = i, i + h
                exp[b, n, p, a] = x[a] * c[a] - x[bb] * s[a]
                exp[b, n, p, bb] = x[bb] * c[bb] + x[a] * s[bb]
        _close(out, exp, 1e-14)


ALL_COMBOS = list(itertools.product((0, 1, 2), (0, 1, 2), (0, 1, 2), (0, 1)))


def test_nrc_grad_matches_closed_form_at_arbitrary_stats():
    """All 54 attribute combos, with encoders, with stats that are not the statistics of x."""
    for i, (nt, nat, rt, order) in enumerate(ALL_COMBOS):
        x, w, _, sin, cos, g = _nrc_inputs(100 + i)
        r = _rng(200 + i)
        st = {p: (r.normal(size=x[p].shape[:3] + (1,)), r.uniform(0.5, 2.0, size=x[p].shape[:3] + (1,)))
              for p in ("q", "k", "aq", "ak")}
        res = _grad(g, x, w, st, sin, cos, nt, nat, rt, order)
        ref = _nrc_closed_form(g["q"], g["k"], g["v"], x, w, st, sin, cos, nt, nat, rt, order)
        for p in ("q", "k", "aq", "ak", "v", "av"):
            _close(res[OUT_NAMES[p]], ref[p])
        for p in ("q", "k", "aq", "ak"):
            t = nt if p in ("q", "k") else nat
            for suffix in ("weight", "bias"):
                key = f"grad_{NAMES[p]}_{suffix}"
                assert (key in res) == (t == 2)
                if t == 2:
                    _close(res[key], ref[p + "_" + suffix[0]])


def test_nrc_stats_as_input_equals_autograd():
    """With the forward's own (true) statistics, the provided-stats oracle equals plain autograd."""
    for i, (nt, nat, rt, order) in enumerate(ALL_COMBOS):
        with_enc = i % 3 != 0
        x, w, b, sin, cos, g = _nrc_inputs(300 + i, d=4, with_enc=with_enc)
        fwd = _fwd(x, w, b, sin, cos, nt, nat, rt, order)
        st = {p: (fwd[f"{NAMES[p]}_mean"], fwd[f"{NAMES[p]}_rstd"])
              for p in ("q", "k", "aq", "ak") if f"{NAMES[p]}_mean" in fwd}
        given = _grad(g, x, w, st, sin, cos, nt, nat, rt, order)
        auto = O.norm_rope_concat_grad_autograd(
            g["q"], g["k"], g["v"], x["q"], x["k"], x["aq"], x["ak"], w["q"], w["k"], w["aq"], w["ak"],
            sin, cos, norm_type=nt, norm_added_type=nat, rope_type=rt, concat_order=order, eps=1e-5)
        grad_keys = {k for k in auto if k.startswith("grad_")}
        assert grad_keys == set(given)
        for k in grad_keys:
            _close(given[k], auto[k], 1e-10)
        for k in st:  # stats recomputed inside autograd are the forward's
            _close(auto[f"{NAMES[k]}_mean"], st[k][0], 0)
            _close(auto[f"{NAMES[k]}_rstd"], st[k][1], 0)


@pytest.mark.parametrize("nt,nat,rt,order,with_enc", [
    (2, 2, 1, 0, True), (1, 2, 2, 1, True), (2, 1, 0, 1, True), (0, 2, 2, 0, True),
    (2, 0, 1, 1, True), (2, 2, 2, 0, False), (1, 1, 1, 1, False),
])
def test_nrc_grad_finite_differences(nt, nat, rt, order, with_enc):
    """Backward oracle vs central differences of the forward oracle (inputs, weights, biases)."""
    x, w, b, sin, cos, g = _nrc_inputs(7, d=4, with_enc=with_enc, B=1, N=2, Sq=2, Sk=2, Seq=2, Sek=1, R=3)
    arrs = {f"x_{p}": v for p, v in x.items() if v is not None}
    arrs.update({f"w_{p}": v for p, v in w.items()})
    arrs.update({f"b_{p}": v for p, v in b.items()})

    def unpack(a):
        """Split the flat FD dict back into x / weight / bias dicts."""
        xx = {p: a.get(f"x_{p}") for p in x}
        return xx, {p: a[f"w_{p}"] for p in w}, {p: a[f"b_{p}"] for p in b}

    def loss(a):
        """Scalar <output, fixed output-gradient> used for finite differences."""
        out = _fwd(*unpack(a), sin, cos, nt, nat, rt, order)
        return float((out["query_output"] * g["q"]).sum() + (out["key_output"] * g["k"]).sum()
                     + (out["value_output"] * g["v"]).sum())

    fwd = _fwd(x, w, b, sin, cos, nt, nat, rt, order)
    st = {p: (fwd[f"{NAMES[p]}_mean"], fwd[f"{NAMES[p]}_rstd"])
          for p in ("q", "k", "aq", "ak") if f"{NAMES[p]}_mean" in fwd}
    res = _grad(g, x, w, st, sin, cos, nt, nat, rt, order)
    for p in x:
        if x[p] is not None:
            _close(res[OUT_NAMES[p]], _fd_grad(loss, arrs, f"x_{p}"), 1e-7)
    for p in ("q", "k", "aq", "ak"):
        t = nt if p in ("q", "k") else nat
        if t != 2:
            continue
        for suffix, prefix in (("weight", "w"), ("bias", "b")):
            fd = _fd_grad(loss, arrs, f"{prefix}_{p}")  # zero when the encoder is absent
            _close(res[f"grad_{NAMES[p]}_{suffix}"], fd, 1e-7)
    if not with_enc:
        assert "grad_encoder_query" not in res and "grad_encoder_value" not in res
        if nat == 2:
            assert not np.any(res["grad_norm_added_key_weight"])


def test_nrc_rejects_inconsistent_inputs():
    """Inconsistent encoders, missing tables or missing stats raise ValueError."""
    x, w, b, sin, cos, g = _nrc_inputs(8, d=4)
    with pytest.raises(ValueError):  # encoder_key without encoder_value
        O.norm_rope_concat_fwd(x["q"], x["k"], x["v"], x["aq"], x["ak"], None)
    with pytest.raises(ValueError):  # rope without tables
        O.norm_rope_concat_fwd(x["q"], x["k"], x["v"], rope_type=1)
    with pytest.raises(ValueError):  # type-1 backward needs the stats
        O.norm_rope_concat_grad(g["q"], g["k"], g["v"], x["q"], x["k"], x["aq"], x["ak"], norm_type=1)


# =====================================================================================
# NsaSelectedAttention
# =====================================================================================

def _nsa_case(seed, sparse_mode, dup=True):
    """2 batches, GQA G=2, duplicates in topk; causal rows always see block 0."""
    r = _rng(seed)
    bs, cnt, N2, G, D, Dv = 2, 3, 2, 2, 4, 3
    cu_q, cu_kv = np.array([3, 7]), np.array([6, 14])
    T1, T2 = cu_q[-1], cu_kv[-1]
    q = r.normal(size=(T1, N2 * G, D))
    k = r.normal(size=(T2, N2, D))
    v = r.normal(size=(T2, N2, Dv))
    kv_blocks = np.diff(np.concatenate(([0], cu_kv))) // bs
    topk = np.zeros((T1, N2, cnt), np.int32)
    for t in range(T1):
        bt = int(np.searchsorted(cu_q, t, side="right"))
        for h in range(N2):
            sel = r.integers(0, kv_blocks[bt], size=cnt)
            sel[0] = 0
            if dup:
                sel[2] = sel[1]
            topk[t, h] = sel
    do = r.normal(size=(T1, N2 * G, Dv))
    return dict(q=q, k=k, v=v, topk=topk, cu_q=cu_q, cu_kv=cu_kv, bs=bs, do=do,
                scale=1 / np.sqrt(D), mode=sparse_mode)


def _nsa_naive_fwd(c):
    """Per-(token, query-head) loops in numpy float64 (docs/reference/nsa_selected_attention.md 2.1-2.4)."""
    q, k, v, topk, bs = c["q"], c["k"], c["v"], c["topk"], c["bs"]
    T1, N1, _ = q.shape
    G = N1 // k.shape[1]
    out = np.zeros((T1, N1, v.shape[2]))
    mx = np.zeros((T1, N1))
    sm = np.zeros((T1, N1))
    q_begin = np.concatenate(([0], c["cu_q"][:-1]))
    kv_begin = np.concatenate(([0], c["cu_kv"][:-1]))
    for t in range(T1):
        b = int(np.searchsorted(c["cu_q"], t, side="right"))
        s = t - q_begin[b]
        for h in range(N1):
            h2 = h // G
            scores, vals = [], []
            for blk in topk[t, h2]:
                for j in range(bs):
                    p = blk * bs + j
                    sc = float(q[t, h] @ k[kv_begin[b] + p, h2])
                    if c["mode"] == 2 and p > s:
                        sc = -O.FLT_MAX
                    scores.append(sc * c["scale"])
                    vals.append(v[kv_begin[b] + p, h2])
            scores = np.array(scores)
            m = scores.max()
            e = np.exp(scores - m)
            mx[t, h], sm[t, h] = m, e.sum()
            out[t, h] = (e / e.sum()) @ np.array(vals)
    return out, mx, sm


def _nsa_formula_bwd(c, o, mx, sm):
    """docs/reference/nsa_selected_attention.md 2.5 in float64 torch, loops over (token, kv head), using the given
    O, max and sum; masking after scaling; scatter via index_add_ (duplicates accumulate)."""
    q, k, v, do = (torch.tensor(c[n], dtype=torch.float64) for n in ("q", "k", "v", "do"))
    o, mx, sm = (torch.tensor(a, dtype=torch.float64) for a in (o, mx, sm))
    T1, N1, _ = q.shape
    N2 = k.shape[1]
    G = N1 // N2
    bs = c["bs"]
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    q_begin = np.concatenate(([0], c["cu_q"][:-1]))
    kv_begin = np.concatenate(([0], c["cu_kv"][:-1]))
    for t in range(T1):
        b = int(np.searchsorted(c["cu_q"], t, side="right"))
        s = t - q_begin[b]
        for h2 in range(N2):
            pos = torch.tensor([blk * bs + j for blk in c["topk"][t, h2] for j in range(bs)])
            rows = pos + int(kv_begin[b])
            ks, vs = k[:, h2].index_select(0, rows), v[:, h2].index_select(0, rows)
            hs = slice(h2 * G, (h2 + 1) * G)
            qg, og, dog = q[t, hs], o[t, hs], do[t, hs]
            S = (qg @ ks.T) * c["scale"]
            if c["mode"] == 2:
                S = torch.where(pos > s, torch.tensor(-O.FLT_MAX, dtype=torch.float64), S)
            P = torch.exp(S - mx[t, hs, :1]) / sm[t, hs, :1]
            dS = P * (dog @ vs.T - (dog * og).sum(1, keepdim=True))
            dq[t, hs] += c["scale"] * (dS @ ks)
            dk[:, h2].index_add_(0, rows, c["scale"] * (dS.T @ qg))
            dv[:, h2].index_add_(0, rows, P.T @ dog)
    return dq.numpy(), dk.numpy(), dv.numpy()


def _nsa_call_fwd(c, q=None, k=None, v=None):
    """nsa_selected_attention_fwd on a test case, optionally with replaced q/k/v."""
    return O.nsa_selected_attention_fwd(
        c["q"] if q is None else q, c["k"] if k is None else k, c["v"] if v is None else v,
        c["topk"], c["cu_q"], c["cu_kv"], scale_value=c["scale"], selected_block_size=c["bs"],
        sparse_mode=c["mode"])


def _nsa_call_grad(c, fwd):
    """nsa_selected_attention_grad on a test case, fed the forward's own outputs."""
    return O.nsa_selected_attention_grad(
        c["q"], c["k"], c["v"], fwd["attention_out"], c["do"], fwd["softmax_max"], fwd["softmax_sum"],
        c["topk"], c["cu_q"], c["cu_kv"], scale_value=c["scale"], selected_block_size=c["bs"],
        sparse_mode=c["mode"])


@pytest.mark.parametrize("mode", [0, 2])
def test_nsa_forward_matches_naive_loops(mode):
    """Vectorised forward == per-(token, head) numpy loops, incl. duplicates and GQA."""
    c = _nsa_case(11, mode)
    res = _nsa_call_fwd(c)
    out, mx, sm = _nsa_naive_fwd(c)
    _close(res["attention_out"], out, 1e-12)
    assert res["softmax_max"].shape == res["softmax_sum"].shape == out.shape[:2] + (8,)
    _close(res["softmax_max"], np.repeat(mx[..., None], 8, -1), 1e-12)
    _close(res["softmax_sum"], np.repeat(sm[..., None], 8, -1), 1e-12)


@pytest.mark.parametrize("mode", [0, 2])
def test_nsa_grad_matches_formula_with_forward_stats(mode):
    """Autograd oracle == the 2.5 formula backward fed the forward's O/max/sum."""
    c = _nsa_case(12, mode)
    fwd = _nsa_call_fwd(c)
    res = _nsa_call_grad(c, fwd)
    dq, dk, dv = _nsa_formula_bwd(c, fwd["attention_out"], fwd["softmax_max"], fwd["softmax_sum"])
    _close(res["dq"], dq, 1e-11)
    _close(res["dk"], dk, 1e-11)
    _close(res["dv"], dv, 1e-11)


@pytest.mark.parametrize("mode", [0, 2])
def test_nsa_grad_finite_differences(mode):
    """Autograd oracle vs central differences; unselected kv rows get zero grad."""
    c = _nsa_case(13, mode)
    arrs = {"q": c["q"].copy(), "k": c["k"].copy(), "v": c["v"].copy()}

    def loss(a):
        """Scalar <output, fixed output-gradient> used for finite differences."""
        return float((_nsa_call_fwd(c, a["q"], a["k"], a["v"])["attention_out"] * c["do"]).sum())

    res = _nsa_call_grad(c, _nsa_call_fwd(c))
    for name, key in (("q", "dq"), ("k", "dk"), ("v", "dv")):
        _close(res[key], _fd_grad(loss, arrs, name), 1e-7)
    # key rows never selected get exactly zero gradient
    selected = np.zeros(c["k"].shape[:2], bool)
    kv_begin = np.concatenate(([0], c["cu_kv"][:-1]))
    for t in range(c["q"].shape[0]):
        b = int(np.searchsorted(c["cu_q"], t, side="right"))
        for h2 in range(c["k"].shape[1]):
            for blk in c["topk"][t, h2]:
                selected[kv_begin[b] + blk * c["bs"]: kv_begin[b] + (blk + 1) * c["bs"], h2] = True
    assert not np.any(res["dv"][~selected])


def test_nsa_rejects_out_of_batch_blocks():
    """Blocks leaving their batch's kv range (incl. negative) raise ValueError."""
    c = _nsa_case(14, 0)
    c["topk"][0, 0, 1] = 3  # batch 0 has 6 kv rows = 3 blocks of 2 -> block 3 crosses into batch 1
    with pytest.raises(ValueError):
        _nsa_call_fwd(c)
    c["topk"][0, 0, 1] = -1
    with pytest.raises(ValueError):
        _nsa_call_fwd(c)


def test_nsa_fully_masked_row_uses_flt_max_before_scale():
    """Degenerate row (every selected key in the future): all raw scores are -FLT_MAX, scaled after
    masking, so max = -FLT_MAX*scale, sum = L and the output is the mean of the gathered values."""
    c = _nsa_case(15, 2)
    c["scale"] = 0.75
    c["topk"][0, 1] = [1, 2, 2]  # token 0 (s = 0) sees in-batch positions 2..5 only -> all masked
    res = _nsa_call_fwd(c)
    G, L = 2, 6
    _close(res["softmax_max"][0, G:2 * G], np.full((G, 8), -O.FLT_MAX * 0.75), 1e-15)
    _close(res["softmax_sum"][0, G:2 * G], np.full((G, 8), float(L)), 0)
    rows = [2, 3, 4, 5, 4, 5]
    _close(res["attention_out"][0, G:2 * G], np.broadcast_to(c["v"][rows, 1].mean(0), (G, 3)), 1e-14)
