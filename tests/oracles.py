"""Independent float64 torch oracles for the three opgen operators.

These functions are test oracles only: they share no code with ``opgen`` and are
written directly from the operator facts in ``/work/shared/reference``:

* AdaLayerNormV2 / AdaLayerNormGrad      -> docs/reference/ada_layer_norm.md  sections 1, 5.1, 5.6
* NormRopeConcat / NormRopeConcatGrad    -> docs/reference/norm_rope_concat.md sections 1, 2, 6
* NsaSelectedAttention / ...Grad (TND)   -> docs/reference/nsa_selected_attention.md sections 2.1-2.7

Conventions shared by every function:

* Array inputs are numpy arrays (or anything ``np.asarray`` accepts) of any float
  dtype, including ``ml_dtypes.bfloat16`` and ``float16``; they are widened exactly
  to float64.  Absent optional inputs are ``None``.
* All arithmetic is float64 torch on CPU.  No rounding to the device dtype is done
  anywhere: the oracle is the exact (float64) mathematics, callers round if they
  want a rounded golden.
* Every function returns a dict of float64 numpy arrays keyed by output name.
* Backward oracles are computed with ``torch.autograd`` (never by transcribing the
  closed-form backward formulas of the notes); the test file checks them against
  closed forms written separately and against finite differences.

Layer-norm backward "at the provided statistics".  The CANN backward kernels take
mean/rstd as inputs and apply the LayerNorm backward formula
``rstd * (g - mean(g) - z * mean(g * z))`` with ``z = (x - mean) * rstd`` built from
those *given* statistics (which need not be the true statistics of ``x``, e.g. the
docs/reference/ada_layer_norm.md 5.1 example).  To reproduce that with autograd we use a
straight-through construction (``_normalize_with_given_stats``): its *value* is
``(x - mean0) * rstd0`` with the provided stats and its *Jacobian* is exactly the
LayerNorm Jacobian evaluated at those stats.  When the provided stats are the true
statistics of ``x`` this coincides with autograd of the plain LayerNorm (tested).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "ada_layer_norm_v2_fwd",
    "ada_layer_norm_grad",
    "ada_layer_norm_grad_autograd",
    "norm_rope_concat_fwd",
    "norm_rope_concat_grad",
    "norm_rope_concat_grad_autograd",
    "nsa_selected_attention_fwd",
    "nsa_selected_attention_grad",
    "FLT_MAX",
]

#: Largest finite float32 (bit pattern 0xFF7FFFFF negated is the NSA mask value).
FLT_MAX = float(np.finfo(np.float32).max)

_F64 = torch.float64


# ----------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------

def _f64(a):
    """numpy-like (any float dtype incl. bf16/fp16) -> contiguous float64 CPU tensor; None stays None."""
    if a is None:
        return None
    arr = np.array(np.asarray(a, dtype=np.float64), dtype=np.float64, copy=True)
    return torch.from_numpy(arr)


def _np(t):
    """float64 tensor -> float64 numpy array (detached copy)."""
    return t.detach().to(_F64).cpu().numpy().copy()


def _leaf(t):
    """Fresh float64 leaf requiring grad."""
    return t.detach().clone().to(_F64).requires_grad_(True)


def _grad_or_zeros(g, like):
    """autograd result or zeros shaped like ``like`` when the input did not reach the loss."""
    return torch.zeros_like(like) if g is None else g


def _normalize_with_given_stats(x, mean0, rstd0):
    """Straight-through LayerNorm normalisation over the last axis.

    Value:    ``(x - mean0) * rstd0`` (mean0/rstd0 are constants, broadcast over the last axis).
    Jacobian: that of ``(x - mean(x)) / sqrt(var(x) + eps)`` evaluated at the given statistics,
    i.e. d z_i / d x_j = rstd0 * (delta_ij - 1/H - z_i z_j / H) with z built from mean0/rstd0.

    Construction: ``m = mean0 + (mean(x) - stop(mean(x)))`` has value mean0 and derivative 1/H;
    ``r = rstd0 + c * (q - stop(q))`` with ``q = mean((x - mean0)^2)`` and ``c = -rstd0^3 / 2``
    has value rstd0 and derivative -rstd0^3 (x_j - mean0) / H, which is d rstd / d x_j of a true
    LayerNorm written in terms of the given statistics.  Both added terms are exactly zero in value.
    """
    mean0 = mean0.detach()
    rstd0 = rstd0.detach()
    xm = x.mean(dim=-1, keepdim=True)
    m = mean0 + (xm - xm.detach())
    q = ((x - mean0) ** 2).mean(dim=-1, keepdim=True)
    r = rstd0 + (-0.5 * rstd0 ** 3) * (q - q.detach())
    return (x - m) * r


def _true_stats(x, eps):
    """Biased mean/var over the last axis; returns (mean, rstd) with keepdim."""
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    rstd = 1.0 / torch.sqrt(var + eps)
    return mean, rstd


# ----------------------------------------------------------------------------------
# AdaLayerNorm
# ----------------------------------------------------------------------------------

def _ada_batch_rows(t, bd, h, name):
    """Accept [*Bd, H] or [*Bd, 1, H] (docs/reference/ada_layer_norm.md 1.5); return view shaped [*Bd, 1, H]."""
    shape = tuple(t.shape)
    if shape not in (bd + (h,), bd + (1, h)):
        raise ValueError(f"{name} shape {shape} must be {bd + (h,)} or {bd + (1, h)}")
    return t.reshape(bd + (1, h))


def _ada_check_x(xt):
    """x rank 2..8 (docs/reference/ada_layer_norm.md 1.5); returns (leading batch dims Bd, H)."""
    if not 2 <= xt.dim() <= 8:
        raise ValueError(f"x must have rank 2..8, got shape {tuple(xt.shape)}")
    return tuple(xt.shape[:-2]), xt.shape[-1]


def _ada_vec(t, h, name, fill):
    """Optional [H] vector (gamma/beta/weight/bias); None -> constant ``fill``."""
    if t is None:
        return torch.full((h,), float(fill), dtype=_F64)
    if t.numel() != h:
        raise ValueError(f"{name} must have {h} elements, got shape {tuple(t.shape)}")
    return t.reshape(h)


def _ada_row_stat(t, x_shape, name):
    """Per-row statistic (mean/rstd) reshaped to [*Bd, S, 1]; needs R = prod(x.shape[:-1]) elements."""
    rows_shape = tuple(x_shape[:-1]) + (1,)
    if t.numel() != int(np.prod(rows_shape)):
        raise ValueError(f"{name} must have shape {rows_shape} (or that many elements), got {tuple(t.shape)}")
    return t.reshape(rows_shape)


def ada_layer_norm_v2_fwd(x, scale, shift, weight=None, bias=None, epsilon=1e-5):
    """AdaLayerNormV2 forward (docs/reference/ada_layer_norm.md 1.1, 1.5, 5.6), float64.

    Args:
        x: [*Bd, S, H] (0..6 leading dims), any float dtype.
        scale, shift: each independently [*Bd, H] or [*Bd, 1, H]; row r of batch b uses row b.
        weight, bias: [H] or None (absent = identity).
        epsilon: added to the biased variance (the device casts it to fp32; not modelled).

    Returns dict of float64 arrays:
        out  [*Bd, S, H] = ((x - mean) * rstd * weight + bias) * (1 + scale) + shift
        mean [*Bd, S, 1], rstd [*Bd, S, 1] = 1 / sqrt(var + eps) (biased, two-pass variance).
    """
    xt = _f64(x)
    bd, h = _ada_check_x(xt)
    sc = _ada_batch_rows(_f64(scale), bd, h, "scale")
    sh = _ada_batch_rows(_f64(shift), bd, h, "shift")
    mean, rstd = _true_stats(xt, float(epsilon))
    y = (xt - mean) * rstd
    if weight is not None:
        y = y * _ada_vec(_f64(weight), h, "weight", 1.0)
    if bias is not None:
        y = y + _ada_vec(_f64(bias), h, "bias", 0.0)
    out = y * (1.0 + sc) + sh
    return {"out": _np(out), "mean": _np(mean), "rstd": _np(rstd)}


def _ada_backward(dy, x, scale, gamma, beta, normalize):
    """Shared autograd driver: normalize(x_leaf) -> z; returns grads dict (scale/shift in [*Bd,1,H])."""
    xt = _f64(x)
    bd, h = _ada_check_x(xt)
    dyt = _f64(dy)
    if tuple(dyt.shape) != tuple(xt.shape):
        raise ValueError(f"dy shape {tuple(dyt.shape)} != x shape {tuple(xt.shape)}")
    sc_in = _f64(scale)
    sc = _ada_batch_rows(sc_in, bd, h, "scale")
    x_l = _leaf(xt)
    sc_l = _leaf(sc)
    sh_l = _leaf(torch.zeros_like(sc))
    g_l = _leaf(_ada_vec(_f64(gamma), h, "gamma", 1.0))
    b_l = _leaf(_ada_vec(_f64(beta), h, "beta", 0.0))
    z, extra = normalize(x_l)
    out = (z * g_l + b_l) * (1.0 + sc_l) + sh_l
    gx, gsc, gsh, gg, gb = torch.autograd.grad(out, (x_l, sc_l, sh_l, g_l, b_l), grad_outputs=dyt)
    res = {
        "pd_x": _np(gx),
        "pd_scale": _np(gsc.reshape(sc_in.shape)),
        "pd_shift": _np(gsh.reshape(sc_in.shape)),
        "pd_gamma": _np(gg),
        "pd_beta": _np(gb),
    }
    res.update(extra)
    return res


def ada_layer_norm_grad(dy, x, rstd, mean, scale, gamma=None, beta=None):
    """AdaLayerNormGrad oracle at the PROVIDED statistics (docs/reference/ada_layer_norm.md 1.2, 5.6), float64 autograd.

    Argument order follows the kernel prototype (rstd before mean).

    Args:
        dy, x: [*Bd, S, H].
        rstd, mean: [*Bd, S, 1] (any shape with R = prod(x.shape[:-1]) elements is accepted); used as
            given, never recomputed -- they need not be the true statistics of x.
        scale: [*Bd, H] or [*Bd, 1, H].
        gamma, beta: [H] or None (None -> ones / zeros, as the aclnn layer substitutes).

    Returns dict of float64 arrays:
        pd_x [*Bd,S,H]; pd_scale and pd_shift with scale's shape (S-reduced per batch);
        pd_gamma, pd_beta [H] (reduced over every row).
    Method: autograd of out = ((x-mean)*rstd*gamma + beta)*(1+scale) + shift, where the normalisation
    is the straight-through construction of ``_normalize_with_given_stats`` (LayerNorm Jacobian at
    the given stats), so pd_x equals the LayerNorm-backward formula of 1.2 for arbitrary stats.
    """
    xt = _f64(x)
    mean_t = _ada_row_stat(_f64(mean), xt.shape, "mean")
    rstd_t = _ada_row_stat(_f64(rstd), xt.shape, "rstd")
    return _ada_backward(dy, x, scale, gamma, beta,
                         lambda xl: (_normalize_with_given_stats(xl, mean_t, rstd_t), {}))


def ada_layer_norm_grad_autograd(dy, x, scale, gamma=None, beta=None, epsilon=1e-5):
    """AdaLayerNorm backward with the statistics recomputed from x inside the autograd graph.

    Plain autograd of the full forward (docs/reference/ada_layer_norm.md 1.1): mean/rstd are functions of x.
    Shapes as in ``ada_layer_norm_grad``; additionally returns the statistics it used:
    ``mean``, ``rstd`` [*Bd, S, 1].  With those statistics fed to ``ada_layer_norm_grad`` both
    must agree (tested to 1e-10).
    """
    eps = float(epsilon)
    box = {}

    def normalize(xl):
        """True LayerNorm of the leaf (stats depend on x); records the stats used."""
        mean, rstd = _true_stats(xl, eps)
        box["mean"], box["rstd"] = _np(mean), _np(rstd)
        return (xl - mean) * rstd, {}

    res = _ada_backward(dy, x, scale, gamma, beta, normalize)
    res.update(box)
    return res


# ----------------------------------------------------------------------------------
# NormRopeConcat
# ----------------------------------------------------------------------------------

def _rope_rotate(x, mode):
    """Forward rotation R(x) along the last axis (docs/reference/norm_rope_concat.md 1.3).

    mode 1 (INTERLEAVE): pairs (2i, 2i+1) -> (-x[2i+1], x[2i]).
    mode 2 (HALF):       (x[:h], x[h:])   -> (-x[h:], x[:h]).
    """
    d = x.shape[-1]
    if mode == 1:
        pairs = x.unflatten(-1, (d // 2, 2))
        return torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
    if mode == 2:
        h = d // 2
        return torch.cat((-x[..., h:], x[..., :h]), dim=-1)
    raise ValueError(f"rope mode {mode}")


def _apply_rope(c, sin, cos, mode):
    """c [B,N,S,D]: rows p < min(R, S) become c*cos[p] + R(c)*sin[p]; the rest pass through."""
    if mode == 0:
        return c
    rows = min(sin.shape[0], c.shape[2])
    head = c[:, :, :rows]
    rotated = head * cos[:rows] + _rope_rotate(head, mode) * sin[:rows]
    return torch.cat((rotated, c[:, :, rows:]), dim=2)


def _concat_bnsd(main, enc, order):
    """Concat along S (order 0: [main, enc]; 1: [enc, main]) then BSND -> BNSD."""
    parts = [main] if enc is None else ([main, enc] if order == 0 else [enc, main])
    return torch.cat(parts, dim=1).permute(0, 2, 1, 3)


def _split_bsnd(g_bnsd, s_main, s_enc, order):
    """Inverse of _concat_bnsd for gradients: BNSD [B,N,S_tot,D] -> (main, enc) BSND slices."""
    g = g_bnsd.permute(0, 2, 1, 3)
    if order == 0:
        return g[:, :s_main], g[:, s_main:s_main + s_enc]
    return g[:, s_enc:s_enc + s_main], g[:, :s_enc]


def _nrc_norm(x, ntype, w, b, eps, given):
    """Per-(b,s,n) LayerNorm over D (docs/reference/norm_rope_concat.md 1.2).

    ntype 0: identity; 1: plain LN; 2: LN * w + b.  ``given`` = (mean, rstd) [B,S,N,1] selects the
    straight-through "provided statistics" form; None recomputes them from x with eps.
    Returns (y, mean, rstd) (mean/rstd None for ntype 0).
    """
    if ntype == 0:
        return x, None, None
    if given is None:
        mean, rstd = _true_stats(x, eps)
        y = (x - mean) * rstd
    else:
        mean, rstd = given
        y = _normalize_with_given_stats(x, mean, rstd)
    if ntype == 2:
        y = y * w + b
    return y, mean, rstd


def _check_types(norm_type, norm_added_type, rope_type, concat_order):
    """Attribute ranges of docs/reference/norm_rope_concat.md 1.2/1.3/4.4 (types 0..2, order 0..1)."""
    for name, val, allowed in (("norm_type", norm_type, (0, 1, 2)),
                               ("norm_added_type", norm_added_type, (0, 1, 2)),
                               ("rope_type", rope_type, (0, 1, 2)),
                               ("concat_order", concat_order, (0, 1))):
        if val not in allowed:
            raise ValueError(f"{name}={val} not in {allowed}")


def _check_bsnd(t, name, bnd=None):
    """4-D BSND tensor whose (B, N, D) equals ``bnd`` when given."""
    if t.dim() != 4:
        raise ValueError(f"{name} must be 4-D BSND, got {tuple(t.shape)}")
    if bnd is not None and (t.shape[0], t.shape[2], t.shape[3]) != bnd:
        raise ValueError(f"{name} B/N/D {(t.shape[0], t.shape[2], t.shape[3])} != {bnd}")


def _rope_tables(rope_type, sin, cos, d):
    """Validated [R, D] sin/cos tables (None, None for rope_type 0); RoPE needs even D."""
    if rope_type == 0:
        return None, None
    if sin is None or cos is None:
        raise ValueError("rope_type != 0 needs rope_sin and rope_cos")
    if d % 2:
        raise ValueError(f"RoPE needs an even head dim, got D={d}")
    if sin.dim() != 2 or sin.shape[1] != d or tuple(cos.shape) != tuple(sin.shape):
        raise ValueError(f"rope_sin/rope_cos must both be [R, {d}], got {tuple(sin.shape)}, {tuple(cos.shape)}")
    return sin, cos


def _affine(w, b, d, ntype):
    """Weight/bias tensors for a stream: ones/zeros when absent (only used for ntype 2)."""
    if ntype != 2:
        return None, None
    w = torch.ones(d, dtype=_F64) if w is None else w.reshape(d)
    b = torch.zeros(d, dtype=_F64) if b is None else b.reshape(d)
    return w, b


def norm_rope_concat_fwd(query, key, value, encoder_query=None, encoder_key=None, encoder_value=None,
                         norm_query_weight=None, norm_query_bias=None, norm_key_weight=None,
                         norm_key_bias=None, norm_added_query_weight=None, norm_added_query_bias=None,
                         norm_added_key_weight=None, norm_added_key_bias=None, rope_sin=None, rope_cos=None,
                         *, norm_type=0, norm_added_type=0, rope_type=0, concat_order=0, eps=1e-5):
    """NormRopeConcat forward (docs/reference/norm_rope_concat.md 1.1-1.7, 6.1), float64.

    Inputs BSND [B, S, N, D]; encoders may be None (encoder_key and encoder_value must be both
    present or both absent).  Weights/biases [D], used only for the type-2 streams (None -> ones /
    zeros).  rope_sin/rope_cos [R, D] (required when rope_type != 0): concatenated position p < R
    (of the Q concat and, independently, of the K concat) becomes x*cos[p] + R(x)*sin[p];
    rope_type 1 INTERLEAVE, 2 HALF.  Value stream: concat + transpose only.

    Returns dict: query_output [B,N,Sq+Seq,D], key_output [B,N,Sk+Sek,D], value_output
    [B,N,Sv+Sev,D]; when norm_type in (1,2): norm_query_mean/rstd [B,Sq,N,1] and norm_key_mean/rstd
    [B,Sk,N,1]; when norm_added_type in (1,2) and the encoder exists: norm_added_query_mean/rstd
    [B,Seq,N,1], norm_added_key_mean/rstd [B,Sek,N,1].  rstd = 1/sqrt(biased var + eps).
    """
    _check_types(norm_type, norm_added_type, rope_type, concat_order)
    q, k, v = _f64(query), _f64(key), _f64(value)
    _check_bsnd(q, "query")
    bnd = (q.shape[0], q.shape[2], q.shape[3])
    _check_bsnd(k, "key", bnd)
    _check_bsnd(v, "value", bnd)
    if k.shape[1] != v.shape[1]:
        raise ValueError(f"key seq {k.shape[1]} != value seq {v.shape[1]}")
    eq, ek, ev = _f64(encoder_query), _f64(encoder_key), _f64(encoder_value)
    for t, name in ((eq, "encoder_query"), (ek, "encoder_key"), (ev, "encoder_value")):
        if t is not None:
            _check_bsnd(t, name, bnd)
    if (ek is None) != (ev is None):
        raise ValueError("encoder_key and encoder_value must be both present or both absent")
    if ek is not None and ek.shape[1] != ev.shape[1]:
        raise ValueError(f"encoder_key seq {ek.shape[1]} != encoder_value seq {ev.shape[1]}")
    d = bnd[2]
    sin, cos = _rope_tables(rope_type, _f64(rope_sin), _f64(rope_cos), d)
    wq, bq = _affine(_f64(norm_query_weight), _f64(norm_query_bias), d, norm_type)
    wk, bk = _affine(_f64(norm_key_weight), _f64(norm_key_bias), d, norm_type)
    waq, baq = _affine(_f64(norm_added_query_weight), _f64(norm_added_query_bias), d, norm_added_type)
    wak, bak = _affine(_f64(norm_added_key_weight), _f64(norm_added_key_bias), d, norm_added_type)
    eps = float(eps)

    res = {}
    outs = {}
    for stream, main, enc, (w, b), (we, be) in (("query", q, eq, (wq, bq), (waq, baq)),
                                                 ("key", k, ek, (wk, bk), (wak, bak))):
        y, m, r = _nrc_norm(main, norm_type, w, b, eps, None)
        if m is not None:
            res[f"norm_{stream}_mean"], res[f"norm_{stream}_rstd"] = _np(m), _np(r)
        ye = None
        if enc is not None:
            ye, me, re_ = _nrc_norm(enc, norm_added_type, we, be, eps, None)
            if me is not None:
                res[f"norm_added_{stream}_mean"], res[f"norm_added_{stream}_rstd"] = _np(me), _np(re_)
        outs[stream] = _apply_rope(_concat_bnsd(y, ye, concat_order), sin, cos, rope_type)
    res["query_output"] = _np(outs["query"])
    res["key_output"] = _np(outs["key"])
    res["value_output"] = _np(_concat_bnsd(v, ev, concat_order))
    return res


def _nrc_backward(gq, gk, gv, query, key, encoder_query, encoder_key, weights, stats, rope_sin, rope_cos,
                  norm_type, norm_added_type, rope_type, concat_order, eps):
    """Shared autograd driver for the NormRopeConcat backward oracles.

    ``weights``: dict part -> weight ([D] or None) for parts q, k, aq, ak.
    ``stats``: dict part -> (mean, rstd) tensors, or None to recompute from x with eps.
    Returns the result dict (plus the stats used under "norm_*_mean/rstd" when recomputed).
    """
    _check_types(norm_type, norm_added_type, rope_type, concat_order)
    gq, gk, gv = _f64(gq), _f64(gk), _f64(gv)
    q, k = _f64(query), _f64(key)
    _check_bsnd(q, "query")
    bnd = (q.shape[0], q.shape[2], q.shape[3])
    _check_bsnd(k, "key", bnd)
    eq, ek = _f64(encoder_query), _f64(encoder_key)
    if eq is not None:
        _check_bsnd(eq, "encoder_query", bnd)
    if ek is not None:
        _check_bsnd(ek, "encoder_key", bnd)
    bsz, n, d = bnd
    sq, sk = q.shape[1], k.shape[1]
    seq = 0 if eq is None else eq.shape[1]
    sek = 0 if ek is None else ek.shape[1]
    for g, name, s_tot in ((gq, "grad_query_output", sq + seq), (gk, "grad_key_output", sk + sek),
                           (gv, "grad_value_output", sk + sek)):
        if tuple(g.shape) != (bsz, n, s_tot, d):
            raise ValueError(f"{name} shape {tuple(g.shape)} != {(bsz, n, s_tot, d)}")
    sin, cos = _rope_tables(rope_type, _f64(rope_sin), _f64(rope_cos), d)

    parts = {"q": (q, norm_type), "k": (k, norm_type), "aq": (eq, norm_added_type), "ak": (ek, norm_added_type)}
    names = {"q": "norm_query", "k": "norm_key", "aq": "norm_added_query", "ak": "norm_added_key"}
    leaves, ys, used_stats = {}, {}, {}
    for p, (x, ntype) in parts.items():
        if x is None:
            continue
        x_l = _leaf(x)
        leaves[p] = x_l
        w = b = None
        if ntype == 2:
            w0 = weights.get(p)
            w = _leaf(torch.ones(d, dtype=_F64) if w0 is None else _f64(w0).reshape(d))
            b = _leaf(torch.zeros(d, dtype=_F64))  # no bias input: its value cannot affect any grad
            leaves[p + "_w"], leaves[p + "_b"] = w, b
        given = None
        if ntype != 0 and stats is not None:
            m0, r0 = stats.get(p, (None, None))
            if m0 is None or r0 is None:
                raise ValueError(f"{names[p]}_mean/_rstd are required when its norm type is {ntype}")
            stat_shape = (bsz, x.shape[1], n, 1)
            m0, r0 = _f64(m0), _f64(r0)
            if m0.numel() != int(np.prod(stat_shape)) or r0.numel() != int(np.prod(stat_shape)):
                raise ValueError(f"{names[p]} stats must be {stat_shape}")
            given = (m0.reshape(stat_shape), r0.reshape(stat_shape))
        y, m, r = _nrc_norm(x_l, ntype, w, b, eps, given)
        ys[p] = y
        if stats is None and m is not None:
            used_stats[names[p] + "_mean"], used_stats[names[p] + "_rstd"] = _np(m), _np(r)

    qo = _apply_rope(_concat_bnsd(ys["q"], ys.get("aq"), concat_order), sin, cos, rope_type)
    ko = _apply_rope(_concat_bnsd(ys["k"], ys.get("ak"), concat_order), sin, cos, rope_type)
    loss = (qo * gq).sum() + (ko * gk).sum()
    keys = list(leaves)
    grads = torch.autograd.grad(loss, [leaves[kk] for kk in keys], allow_unused=True)
    grads = {kk: _grad_or_zeros(g, leaves[kk]) for kk, g in zip(keys, grads)}

    res = {"grad_query": _np(grads["q"]), "grad_key": _np(grads["k"])}
    if "aq" in grads:
        res["grad_encoder_query"] = _np(grads["aq"])
    if "ak" in grads:
        res["grad_encoder_key"] = _np(grads["ak"])
    gv_main, gv_enc = _split_bsnd(gv, sk, sek, concat_order)
    res["grad_value"] = _np(gv_main)
    if ek is not None:
        res["grad_encoder_value"] = _np(gv_enc)
    zeros_d = np.zeros(d, dtype=np.float64)
    if norm_type == 2:
        for p in ("q", "k"):
            res[f"grad_{names[p]}_weight"] = _np(grads[p + "_w"])
            res[f"grad_{names[p]}_bias"] = _np(grads[p + "_b"])
    if norm_added_type == 2:
        for p in ("aq", "ak"):
            present = (p + "_w") in grads
            res[f"grad_{names[p]}_weight"] = _np(grads[p + "_w"]) if present else zeros_d.copy()
            res[f"grad_{names[p]}_bias"] = _np(grads[p + "_b"]) if present else zeros_d.copy()
    res.update(used_stats)
    return res


def norm_rope_concat_grad(grad_query_output, grad_key_output, grad_value_output, query, key,
                          encoder_query=None, encoder_key=None,
                          norm_query_weight=None, norm_query_mean=None, norm_query_rstd=None,
                          norm_key_weight=None, norm_key_mean=None, norm_key_rstd=None,
                          norm_added_query_weight=None, norm_added_query_mean=None, norm_added_query_rstd=None,
                          norm_added_key_weight=None, norm_added_key_mean=None, norm_added_key_rstd=None,
                          rope_sin=None, rope_cos=None,
                          *, norm_type=0, norm_added_type=0, rope_type=0, concat_order=0):
    """NormRopeConcatGrad oracle at the PROVIDED statistics (docs/reference/norm_rope_concat.md 2, 2.1, 2.3, 6.2).

    Args:
        grad_query_output [B,N,Sq+Seq,D], grad_key_output [B,N,Sk+Sek,D], grad_value_output
            [B,N,Sk+Sek,D] (value seq := key seq, encoder value seq := encoder key seq).
        query [B,Sq,N,D], key [B,Sk,N,D], encoder_query [B,Seq,N,D] / encoder_key [B,Sek,N,D] or None.
        *_weight [D] (type-2 streams; None -> ones).  *_mean / *_rstd [B,S_part,N,1], required for
            type 1/2 streams, used as given (straight-through LN backward, see module docstring).
        rope_sin / rope_cos [R, D] (required when rope_type != 0).

    Returns dict of float64 arrays: grad_query [B,Sq,N,D], grad_key, grad_value [B,Sk,N,D];
    grad_encoder_query [B,Seq,N,D] if encoder_query given; grad_encoder_key and grad_encoder_value
    [B,Sek,N,D] if encoder_key given; if norm_type == 2: grad_norm_query_weight/_bias and
    grad_norm_key_weight/_bias [D]; if norm_added_type == 2: grad_norm_added_query_weight/_bias and
    grad_norm_added_key_weight/_bias [D] (zeros for an absent encoder).  Bias grads are the sums of
    the post-RoPE-adjoint gradient (there is no bias input: biases cannot influence any gradient).
    Method: torch autograd of the forward (norm -> concat -> transpose -> RoPE) against the output
    gradients; value grads are the transposed slices of grad_value_output.
    """
    weights = {"q": norm_query_weight, "k": norm_key_weight,
               "aq": norm_added_query_weight, "ak": norm_added_key_weight}
    stats = {"q": (norm_query_mean, norm_query_rstd), "k": (norm_key_mean, norm_key_rstd),
             "aq": (norm_added_query_mean, norm_added_query_rstd),
             "ak": (norm_added_key_mean, norm_added_key_rstd)}
    return _nrc_backward(grad_query_output, grad_key_output, grad_value_output, query, key,
                         encoder_query, encoder_key, weights, stats, rope_sin, rope_cos,
                         norm_type, norm_added_type, rope_type, concat_order, 0.0)


def norm_rope_concat_grad_autograd(grad_query_output, grad_key_output, grad_value_output, query, key,
                                   encoder_query=None, encoder_key=None,
                                   norm_query_weight=None, norm_key_weight=None,
                                   norm_added_query_weight=None, norm_added_key_weight=None,
                                   rope_sin=None, rope_cos=None,
                                   *, norm_type=0, norm_added_type=0, rope_type=0, concat_order=0, eps=1e-5):
    """NormRopeConcat backward with LN statistics recomputed from x inside the autograd graph.

    Same shapes and output keys as ``norm_rope_concat_grad``, plus the statistics it used
    (norm_query_mean/_rstd, ... as in the forward).  Plain autograd of the true LayerNorm; with
    those statistics ``norm_rope_concat_grad`` must agree (tested).
    """
    weights = {"q": norm_query_weight, "k": norm_key_weight,
               "aq": norm_added_query_weight, "ak": norm_added_key_weight}
    return _nrc_backward(grad_query_output, grad_key_output, grad_value_output, query, key,
                         encoder_query, encoder_key, weights, None, rope_sin, rope_cos,
                         norm_type, norm_added_type, rope_type, concat_order, float(eps))


# ----------------------------------------------------------------------------------
# NsaSelectedAttention (TND)
# ----------------------------------------------------------------------------------

def _nsa_plan(query, key, value, topk_indices, actual_seq_qlen, actual_seq_kvlen, selected_block_size,
              sparse_mode):
    """Validate and build the gather plan (docs/reference/nsa_selected_attention.md 2.1-2.3).

    Returns (q, k, v, plan) with plan = dict(
        rows [T1,N2,L] absolute kv rows, pos [T1,N2,L] in-batch key positions,
        s [T1] in-batch query positions, causal bool, G).
    """
    q, k, v = _f64(query), _f64(key), _f64(value)
    if q.dim() != 3 or k.dim() != 3 or v.dim() != 3:
        raise ValueError("query/key/value must be TND (rank 3)")
    t1, n1, d = q.shape
    t2, n2, dk = k.shape
    if dk != d or v.shape[0] != t2 or v.shape[1] != n2:
        raise ValueError(f"shape mismatch q {tuple(q.shape)} k {tuple(k.shape)} v {tuple(v.shape)}")
    if n1 % n2:
        raise ValueError(f"N1={n1} not a multiple of N2={n2}")
    if sparse_mode not in (0, 2):
        raise ValueError(f"sparse_mode {sparse_mode} not in (0, 2)")
    bs = int(selected_block_size)
    if bs <= 0:
        raise ValueError("selected_block_size must be positive")
    topk = np.asarray(topk_indices)
    if topk.ndim != 3 or topk.shape[:2] != (t1, n2) or not np.issubdtype(topk.dtype, np.integer):
        raise ValueError(f"topk_indices must be integer [T1={t1}, N2={n2}, cnt], got {topk.shape} {topk.dtype}")
    cu_q = np.asarray(actual_seq_qlen, dtype=np.int64).reshape(-1)
    cu_kv = np.asarray(actual_seq_kvlen, dtype=np.int64).reshape(-1)
    if cu_q.size != cu_kv.size or cu_q.size == 0:
        raise ValueError("actual_seq_qlen / actual_seq_kvlen must be non-empty and of equal length")
    if np.any(np.diff(cu_q) < 0) or np.any(np.diff(cu_kv) < 0) or cu_q[0] < 0 or cu_kv[0] < 0:
        raise ValueError("cumulative sequence lengths must be non-decreasing and non-negative")
    if cu_q[-1] != t1 or cu_kv[-1] != t2:
        raise ValueError(f"cumulative ends ({cu_q[-1]}, {cu_kv[-1]}) must equal (T1, T2) = ({t1}, {t2})")
    q_start = np.concatenate(([0], cu_q[:-1]))
    kv_start = np.concatenate(([0], cu_kv[:-1]))
    tok = np.arange(t1)
    batch = np.searchsorted(cu_q, tok, side="right")          # batch of each query token
    s = tok - q_start[batch]
    kv0 = kv_start[batch]
    kv_len = cu_kv[batch] - kv0
    cnt = topk.shape[2]
    pos = (topk.astype(np.int64)[:, :, :, None] * bs + np.arange(bs)).reshape(t1, n2, cnt * bs)
    bad = (pos < 0) | (pos >= kv_len[:, None, None])
    if bad.any():
        t_bad, h_bad, _ = np.argwhere(bad)[0]
        raise ValueError(f"topk block out of its batch's kv range at token {t_bad}, kv head {h_bad}")
    rows = kv0[:, None, None] + pos
    plan = {"rows": torch.from_numpy(rows), "pos": torch.from_numpy(pos), "s": torch.from_numpy(s),
            "causal": sparse_mode == 2, "G": n1 // n2}
    return q, k, v, plan


def _nsa_forward(q, k, v, plan, scale_value):
    """Vectorised float64 forward on tensors; returns (O [T1,N1,Dv], m [T1,N1], l [T1,N1])."""
    t1, n1, d = q.shape
    n2 = k.shape[1]
    g = plan["G"]
    heads = torch.arange(n2).view(1, n2, 1)
    k_sel = k[plan["rows"], heads]                  # [T1,N2,L,D]   gathered in topk order
    v_sel = v[plan["rows"], heads]                  # [T1,N2,L,Dv]
    scores = torch.einsum("thgd,thld->thgl", q.reshape(t1, n2, g, d), k_sel)
    if plan["causal"]:
        future = plan["pos"] > plan["s"].view(t1, 1, 1)         # [T1,N2,L]
        scores = scores.masked_fill(future.unsqueeze(2), -FLT_MAX)   # before scaling (2.3)
    scores = scores * float(scale_value)
    m = scores.amax(dim=-1, keepdim=True).detach()
    e = torch.exp(scores - m)
    l = e.sum(dim=-1, keepdim=True)
    out = torch.einsum("thgl,thlv->thgv", e / l, v_sel).reshape(t1, n1, v.shape[2])
    return out, m.reshape(t1, n1), l.reshape(t1, n1)


def nsa_selected_attention_fwd(query, key, value, topk_indices, actual_seq_qlen, actual_seq_kvlen, *,
                               scale_value, selected_block_size, sparse_mode=0):
    """NsaSelectedAttention forward, TND (docs/reference/nsa_selected_attention.md 2.1-2.4, 2.7), float64.

    Args:
        query [T1,N1,D], key [T2,N2,D], value [T2,N2,Dv]; topk_indices int [T1,N2,cnt] (block index
        relative to the batch's kv start); actual_seq_qlen / actual_seq_kvlen cumulative ends [B]
        (last entries must equal T1 / T2).  Query heads n2*G..(n2+1)*G share kv head n2 and
        topk[t, n2].  L = cnt*bs keys gathered in topk order (duplicates count twice).  Every
        gathered key must lie inside its batch (ValueError otherwise; the device does not check).
        sparse_mode 2: key at in-batch position p is masked iff p > s (in-batch query position),
        by setting the raw score to -FLT_MAX before scaling.

    Returns dict: softmax_max, softmax_sum [T1,N1,8] (8 equal copies of max of the scaled scores
    and sum of exp(scaled - max)), attention_out [T1,N1,Dv].
    Note: in float64 the masked score -FLT_MAX*scale stays finite even for scale > 1 (fp32 gives
    -inf); this only matters for a fully masked row, which is degenerate.
    """
    q, k, v, plan = _nsa_plan(query, key, value, topk_indices, actual_seq_qlen, actual_seq_kvlen,
                              selected_block_size, sparse_mode)
    with torch.no_grad():
        out, m, l = _nsa_forward(q, k, v, plan, scale_value)
    rep = (1, 1, 8)
    return {"softmax_max": _np(m.unsqueeze(-1).repeat(rep)),
            "softmax_sum": _np(l.unsqueeze(-1).repeat(rep)),
            "attention_out": _np(out)}


def nsa_selected_attention_grad(query, key, value, attention_out, attention_out_grad, softmax_max, softmax_sum,
                                topk_indices, actual_seq_qlen, actual_seq_kvlen, *,
                                scale_value, selected_block_size, sparse_mode=0):
    """NsaSelectedAttentionGrad oracle, TND (docs/reference/nsa_selected_attention.md 2.5, 2.7), float64 autograd.

    Recomputes the float64 forward of ``nsa_selected_attention_fwd`` from query/key/value inside
    autograd and back-propagates attention_out_grad [T1,N1,Dv].  This is the true gradient of the
    forward; ``attention_out`` [T1,N1,Dv] and ``softmax_max``/``softmax_sum`` [T1,N1,8] are accepted
    for signature parity (shape-checked) but NOT used.  When they are the forward's own outputs it
    equals the formula-based backward of 2.5 (tested), except on fully-masked rows (degenerate,
    2.4/2.7) where the device's mask-after-scale backward differs from the true gradient.
    Gradients of duplicated / shared key rows accumulate.

    Returns dict: dq [T1,N1,D], dk [T2,N2,D], dv [T2,N2,Dv] (rows never selected get 0).
    """
    q, k, v, plan = _nsa_plan(query, key, value, topk_indices, actual_seq_qlen, actual_seq_kvlen,
                              selected_block_size, sparse_mode)
    t1, n1, _ = q.shape
    dv_dim = v.shape[2]
    dout = _f64(attention_out_grad)
    if tuple(dout.shape) != (t1, n1, dv_dim):
        raise ValueError(f"attention_out_grad shape {tuple(dout.shape)} != {(t1, n1, dv_dim)}")
    for a, name, shp in ((attention_out, "attention_out", (t1, n1, dv_dim)),
                         (softmax_max, "softmax_max", (t1, n1, 8)),
                         (softmax_sum, "softmax_sum", (t1, n1, 8))):
        if a is not None and tuple(np.shape(a)) != shp:
            raise ValueError(f"{name} shape {tuple(np.shape(a))} != {shp}")
    ql, kl, vl = _leaf(q), _leaf(k), _leaf(v)
    out, _, _ = _nsa_forward(ql, kl, vl, plan, scale_value)
    dq, dk, dv = torch.autograd.grad(out, (ql, kl, vl), grad_outputs=dout, allow_unused=True)
    return {"dq": _np(_grad_or_zeros(dq, ql)), "dk": _np(_grad_or_zeros(dk, kl)),
            "dv": _np(_grad_or_zeros(dv, vl))}
