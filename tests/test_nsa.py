"""NsaSelectedAttention (forward) and NsaSelectedAttentionGrad (backward) through the interpreter.

Facts: docs/reference/nsa_selected_attention.md (§1 interfaces, §2 math, §5 shapes).
Independent sources: tests/oracles.py (float64 torch forward and torch.autograd backward) and a
float64 NumPy transcription of the §2.5 backward formula written in this file (`_bwd_formula`).

Precision reasoning used below:

* Forward softmax statistics (softmax_max / softmax_sum) are float32 outputs.  The golden is the
  float64 math on the SAME T-rounded inputs (fp16 / bf16 widen exactly), so the T rounding of
  query/key is not an error source at all: the only deviation is fp32 arithmetic (a fp16/bf16 x
  fp16/bf16 product is exact in fp32, the D-term dot product, the scale, exp and the L-term sum add
  a few ulp of fp32).  Hence the threshold of the *output* dtype, fp32 (Th = 2^-13), is the right
  one; a fp16/bf16 threshold would hide a wrong stat by up to 2^-7.
* attention_out is T: P is rounded to T before P @ V (§2.4) and O is rounded to T.  With value > 0
  each is a relative perturbation <= u_T of O = sum P_l V_l, so |dO|/O <= 2 u_T = Th(T) elementwise.
* Backward exact mode uses the GIVEN attentionOut for Dr = rowsum(dO * O) (§2.5).  A T-rounded O
  differs from the true O by |O_T - O| <= u_T |O| (u = 2^-11 fp16, 2^-8 bf16) and the given float32
  statistics differ from the float64 ones by <= u32 |.| (u32 = 2^-24).  `_autograd_bound` turns
  these two input roundings into an elementwise bound on exact-mode minus autograd.
* Why CANN's elementwise MERE/MARE is not asserted on signed O / dq / dk / dv (measured, seed 0):
  the device error of these outputs is absolute-type, ~u_T * rms (P and dS are rounded to T before
  the second matmuls, §2.4/§2.5), while the outputs are signed sums with elements arbitrarily close
  to 0 (exactly 0 for dq of a row with one visible key: P = 1, O = V_0, dS = 0).  |err|/(|g| + 1e-7)
  then explodes on those elements and, for a Gaussian-like golden, the mean picks up a log factor:
    forward O vs float64:   MERE 1.2e-3..2.6e-3 (fp16, Th 9.8e-4), 8.7e-3..1.5e-2 (bf16, Th 7.8e-3);
                            MARE 1.0..13.7 (fp16), 2.3..481 (bf16), worst at |O| = 1.2e-7.
    backward device vs exact: dq MERE 2.9e-3..3.4e-2 (fp16), 6.3e-3..0.17 (bf16), MARE up to 965;
                            dk MERE 1.6e-4..8.1e-3, MARE 0.31..61; dv MERE 1.9e-4..2.8e-2, MARE 0.25..197;
                            the worst elements have |golden| / rms between 0 and 1e-3.
  The relative L2 error is small and uniform: 2.7e-4..3.0e-4 (fp16, 0.30 Th), 2.2e-3..2.6e-3 (bf16,
  0.33 Th).  So the signed outputs are checked with `_assert_device_close` (relative L2 < Th plus CANN's
  mixed-tolerance rule in rms units), and the full CANN MERE/MARE is asserted where no cancellation
  exists: O with value > 0 (MERE <= 1.5e-3, MARE <= 6.5e-3 bf16; 1.9e-4 / 7.8e-4 fp16) and dv with
  dO > 0 (MERE <= 1.4e-3, MARE <= 6.6e-3 bf16; 1.9e-4 / 8.3e-4 fp16).  Forward stats vs float64:
  MERE <= 5.6e-7, MARE <= 2.5e-5 (fp32 Th 1.2e-4 / 1.2e-3).
"""

from __future__ import annotations

import os
import sys
from collections import namedtuple

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from inproc import cli  # noqa: E402
from nsa_inputs import legal_topk  # noqa: E402
from oracles import nsa_selected_attention_fwd, nsa_selected_attention_grad  # noqa: E402
from precision import THRESHOLD, assert_cann_precision, mere_mare  # noqa: E402

from opgen.errors import ValidationError  # noqa: E402
from opgen.interp import interpret  # noqa: E402

FWD, BWD = "NsaSelectedAttention", "NsaSelectedAttentionGrad"
NP_T = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
U_T = {"float16": 2.0**-11, "bfloat16": 2.0**-8}          # unit roundoff (half ulp at 1) of T
U32 = 2.0**-24


# ------------------------------------------------------------------------------------------------
# cases: G in {1, 2, 4, 16}; D/Dv in {32/16, 128/128, 192/128}; bs {16, 32, 64}; cnt {1, 4, 16};
# 3 batches of unequal lengths (kv lengths not always multiples of bs, so some kv rows are never
# selected); duplicates inside topk rows; fp16 and bf16; sparse_mode 0 and 2.
# scale None = D^-0.5.  The s1.5 case uses scale > 1 (fp32 masked score -FLT_MAX*1.5 = -inf on the
# device, §2.3) with query values x0.08 so that the softmax is not one-hot.
# ------------------------------------------------------------------------------------------------
Case = namedtuple("Case", "id n1 n2 d dv bs cnt ql kl dtype mode scale qmul", defaults=(None, 1.0))
CASES = [
    Case("g1_d32_bs16_c4_f16_m2", 2, 2, 32, 16, 16, 4, (37, 11, 24), (70, 40, 100), "float16", 2),
    Case("g2_d128_bs32_c4_bf16_m2_s1.5", 4, 2, 128, 128, 32, 4, (40, 9, 23), (96, 64, 150), "bfloat16", 2, 1.5, 0.08),
    Case("g4_d192_bs64_c16_f16_m0", 8, 2, 192, 128, 64, 16, (5, 3, 4), (1024, 1100, 1030), "float16", 0),
    Case("g16_d192_bs64_c4_bf16_m2", 16, 1, 192, 128, 64, 4, (70, 12, 40), (256, 300, 200), "bfloat16", 2),
    Case("g4_d32_bs16_c16_bf16_m0", 4, 1, 32, 16, 16, 16, (20, 30, 14), (256, 300, 128), "bfloat16", 0),
    Case("g2_d128_bs16_c1_f16_m2", 4, 2, 128, 128, 16, 1, (33, 17, 30), (48, 20, 64), "float16", 2),
    Case("g16_d32_bs32_c16_f16_m2", 32, 2, 32, 16, 32, 16, (40, 70, 10), (128, 512, 64), "float16", 2),
    Case("g1_d128_bs64_c1_bf16_m0", 1, 1, 128, 128, 64, 1, (3, 5, 2), (64, 130, 200), "bfloat16", 0),
]
IDS = [c.id for c in CASES]
# the two largest cases (D = 192 with 16 or 4 query heads per key head, 10-20 s per test) run in the full suite only
CASE_PARAMS = [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.id.startswith(("g16_d192", "g4_d192")) else [])
               for c in CASES]


_MEMO: dict = {}


def _memo(key, fn):
    """Per-session cache of deterministic, read-only intermediate results (keeps the file < 90 s)."""
    if key not in _MEMO:
        _MEMO[key] = fn()
    return _MEMO[key]


def _make(case, seed=0):
    """Fresh (shallow-copied) dict of the cached inputs of `case` (see _make_inputs)."""
    return dict(_memo(("make", case, seed), lambda: _make_inputs(case, seed)))


def _make_inputs(case, seed):
    """Random legal inputs of one case: T-typed tensors ~N(0,1), unequal batches, topk with duplicates
    inside rows; under sparse_mode 2 the first entry of every row is a visible block (idx*bs <= s)."""
    rng = np.random.default_rng(seed)
    tdt = NP_T[case.dtype]
    cu_q, cu_kv = np.cumsum(case.ql).astype(np.int64), np.cumsum(case.kl).astype(np.int64)
    t1, t2 = int(cu_q[-1]), int(cu_kv[-1])

    def rnd(*shape, mul=1.0):
        return (rng.standard_normal(shape) * mul).astype(np.float32).astype(tdt)

    topk = legal_topk(rng, case.ql, case.kl, case.n2, case.cnt, case.bs, case.mode == 2)
    return dict(q=rnd(t1, case.n1, case.d, mul=case.qmul), k=rnd(t2, case.n2, case.d), v=rnd(t2, case.n2, case.dv),
                do=rnd(t1, case.n1, case.dv), topk=topk, cu_q=cu_q, cu_kv=cu_kv, bs=case.bs, cnt=case.cnt,
                n1=case.n1, dtype=case.dtype, mode=case.mode,
                scale=float(case.d ** -0.5 if case.scale is None else case.scale))


def _fwd_args(c, mask=True, mode=None):
    """(inputs, attrs) of NsaSelectedAttention; the mask tensor is present iff `mask` (§2.3)."""
    inputs = {"query": c["q"], "key": c["k"], "value": c["v"], "topk_indices": c["topk"],
              "atten_mask": np.ones((4, 4), np.bool_) if mask else None,
              "actual_seq_qlen": c["cu_q"], "actual_seq_kvlen": c["cu_kv"]}
    attrs = {"scale_value": c["scale"], "head_num": c["n1"], "sparse_mode": c["mode"] if mode is None else mode,
             "input_layout": "TND", "selected_block_size": c["bs"], "selected_block_count": c["cnt"]}
    return inputs, attrs


def _bwd_args(c, o, mx, sm, mode=None):
    """(inputs, attrs) of NsaSelectedAttentionGrad with the given forward O / max / sum."""
    inputs = {"query": c["q"], "key": c["k"], "value": c["v"], "attentionOut": o, "attentionOutGrad": c["do"],
              "softmaxMax": np.asarray(mx, np.float32), "softmaxSum": np.asarray(sm, np.float32),
              "topkIndices": c["topk"], "actualSeqQLen": c["cu_q"], "actualSeqKVLlen": c["cu_kv"],
              "attenMsk": None}
    attrs = {"scaleValue": c["scale"], "selectedBlockCount": c["cnt"], "selectedBlockSize": c["bs"],
             "headNum": c["n1"], "inputLayout": "TND", "sparseMode": c["mode"] if mode is None else mode}
    return inputs, attrs


def _oracle_fwd(c, mode=None):
    return nsa_selected_attention_fwd(c["q"], c["k"], c["v"], c["topk"], c["cu_q"], c["cu_kv"],
                                      scale_value=c["scale"], selected_block_size=c["bs"],
                                      sparse_mode=c["mode"] if mode is None else mode)


def _oracle_grad(c):
    return nsa_selected_attention_grad(c["q"], c["k"], c["v"], None, c["do"], None, None, c["topk"], c["cu_q"],
                                       c["cu_kv"], scale_value=c["scale"], selected_block_size=c["bs"],
                                       sparse_mode=c["mode"])


def _given_fwd(c):
    """Backward inputs as a user would hold them: float64 forward O rounded to T, stats in float32."""
    f = _oracle_fwd(c)
    return (f["attention_out"].astype(np.float32).astype(NP_T[c["dtype"]]),
            f["softmax_max"].astype(np.float32), f["softmax_sum"].astype(np.float32))


def _given(case):
    """Cached _given_fwd of the unmodified case."""
    return _memo(("given", case), lambda: _given_fwd(_make(case)))


def _exact_bwd(case):
    """Cached exact-mode backward of the unmodified case fed _given(case)."""
    return _memo(("exact_bwd", case), lambda: interpret(BWD, *_bwd_args(_make(case), *_given(case)), mode="exact"))


# ------------------------------------------------------------------------------------------------
# independent float64 transcription of §2.5 (given O and given stats), vectorised with NumPy
# ------------------------------------------------------------------------------------------------
def _plan(c):
    """rows [T1,N2,L] absolute kv rows, visible [T1,N2,L] (all True unless sparse_mode 2)."""
    cu_q, cu_kv, topk, bs = c["cu_q"], c["cu_kv"], c["topk"].astype(np.int64), c["bs"]
    t1, n2, cnt = topk.shape
    tok = np.arange(t1)
    b = np.searchsorted(cu_q, tok, side="right")
    s = tok - np.concatenate(([0], cu_q[:-1]))[b]
    kv0 = np.concatenate(([0], cu_kv[:-1]))[b]
    pos = (topk[..., None] * bs + np.arange(bs)).reshape(t1, n2, cnt * bs)
    vis = pos <= s[:, None, None] if c["mode"] == 2 else np.ones(pos.shape, bool)
    return kv0[:, None, None] + pos, vis


def _round_t(x, dtype):
    """float64 -> nearest T value (ties-to-even; the device rounds ties away, ties are measure-zero)."""
    return np.asarray(x, np.float64).astype(NP_T[dtype]).astype(np.float64)


def _fwd_quant_golden(c):
    """Forward golden of the device algorithm (§2.4): float64 math, P rounded to T before P @ Vsel."""
    f = lambda a: np.asarray(a, np.float64)  # noqa: E731
    q, k, v = f(c["q"]), f(c["k"]), f(c["v"])
    t1, n1, d = q.shape
    n2 = k.shape[1]
    rows, vis = _plan(c)
    heads = np.arange(n2)[None, :, None]
    S = np.einsum("tngd,tnld->tngl", q.reshape(t1, n2, n1 // n2, d), k[rows, heads]) * c["scale"]
    S = np.where(vis[:, :, None, :], S, -np.inf)
    e = np.exp(S - S.max(-1, keepdims=True))
    p = _round_t(e / e.sum(-1, keepdims=True), c["dtype"])
    return np.einsum("tngl,tnlv->tngv", p, v[rows, heads]).reshape(t1, n1, -1)


def _bwd_formula(c, o, mx, sm, quant=False):
    """§2.5: S = scale*Q Ksel^T, P = exp(S - m)/l (0 where masked), dS = P*(dO Vsel^T - rowsum(dO*O)),
    dq = scale*dS Ksel, dk/dv scatter-added (duplicates accumulate).  quant: round P and dS to T
    before the second matmuls as the device does.  Returns also (P, dS, ...) for error bounds."""
    f = lambda a: np.asarray(a, np.float64)  # noqa: E731
    q, k, v, do, o = f(c["q"]), f(c["k"]), f(c["v"]), f(c["do"]), f(o)
    t1, n1, d = q.shape
    t2, n2, dv = v.shape
    g = n1 // n2
    rows, vis = _plan(c)
    heads = np.arange(n2)[None, :, None]
    ks, vs = k[rows, heads], v[rows, heads]                          # [T1,N2,L,D], [T1,N2,L,Dv]
    qg, og, dog = q.reshape(t1, n2, g, d), o.reshape(t1, n2, g, dv), do.reshape(t1, n2, g, dv)
    m = f(mx)[..., 0].reshape(t1, n2, g, 1)
    l_ = f(sm)[..., 0].reshape(t1, n2, g, 1)
    S = np.einsum("tngd,tnld->tngl", qg, ks) * c["scale"]
    P = np.where(vis[:, :, None, :], np.exp(S - m) / l_, 0.0)
    dP = np.einsum("tngv,tnlv->tngl", dog, vs)
    dS = P * (dP - (dog * og).sum(-1, keepdims=True))
    if quant:
        P, dS = _round_t(P, c["dtype"]), _round_t(dS, c["dtype"])
    dq = c["scale"] * np.einsum("tngl,tnld->tngd", dS, ks).reshape(t1, n1, d)
    dk, dvv = np.zeros((t2, n2, d)), np.zeros((t2, n2, dv))
    hh = np.broadcast_to(heads, rows.shape)
    np.add.at(dk, (rows, hh), c["scale"] * np.einsum("tngl,tngd->tnld", dS, qg))
    np.add.at(dvv, (rows, hh), np.einsum("tngl,tngv->tnlv", P, dog))
    return {"dq": dq, "dk": dk, "dv": dvv}, (P, dS, ks, qg, dog, rows, hh)


def _autograd_bound(c, o, mx, aux):
    """Elementwise bound on |exact-mode(given O_T, stats_f32) - autograd(true O, float64 stats)|.

    O_T = round_T(O): |dDr| <= a = u_T * rowsum(|dO| |O_T|) * (1 + u_T)    (Dr = rowsum(dO * O)).
    stats in fp32: P' = P exp(m - m') l / l', |P' - P| <= b P', b = 2 u32 (|m| + 1) (first order x2).
    Hence |dS' - dS| <= P' a + b |dS'|  and  |P' - P| <= b P'; propagated through the linear maps
    dq = scale dS K, dk = scale dS^T Q, dv = P^T dO with absolute values."""
    P, dS, ks, qg, dog, rows, hh = aux
    t1, n2, g, dv = dog.shape
    u = U_T[c["dtype"]]
    a = u * (1 + u) * (np.abs(dog) * np.abs(np.asarray(o, np.float64)).reshape(dog.shape)).sum(-1, keepdims=True)
    b = 2 * U32 * (np.abs(np.asarray(mx, np.float64)[..., :1]).reshape(t1, n2, g, 1) + 1)
    eds = P * a + b * np.abs(dS)
    sc = abs(c["scale"])
    tq = sc * np.einsum("tngl,tnld->tngd", eds, np.abs(ks)).reshape(t1, n2 * g, -1)
    tk = np.zeros((int(c["cu_kv"][-1]), n2, ks.shape[-1]))
    tv = np.zeros((int(c["cu_kv"][-1]), n2, dv))
    np.add.at(tk, (rows, hh), sc * np.einsum("tngl,tngd->tnld", eds, np.abs(qg)))
    np.add.at(tv, (rows, hh), np.einsum("tngl,tngv->tnlv", b * P, np.abs(dog)))
    return {"dq": tq, "dk": tk, "dv": tv}


def _ulp(x, dtype):
    """Spacing of T at |x| (normal range)."""
    mant = {"float16": 10, "bfloat16": 7}[dtype]
    return 2.0 ** (np.floor(np.log2(np.maximum(np.abs(x), 2.0**-14))) - mant)


def _assert_device_close(actual, golden, dtype, what):
    """Device-vs-golden criteria for outputs whose error is absolute-type (module doc): relative L2 error
    < Th(T), and CANN's mixed-tolerance variant (docs/reference/ada_layer_norm.md §5.5) applied to the tensors
    in units of the golden's rms r (that rule assumes O(1) data; dq reaches |78| in one case):
    >= 99 % of elements with |a - g| <= Th (r + |g|), and max |a - g| < max(0.1 r, 32 ulp_T(|g|))."""
    th = THRESHOLD[dtype]
    a, g = np.asarray(actual, np.float64), np.asarray(golden, np.float64)
    assert a.shape == g.shape and np.isfinite(a).all(), what
    err = np.abs(a - g)
    rms = np.sqrt(np.mean(g * g))
    rel_l2 = np.linalg.norm(a - g) / np.linalg.norm(g)
    frac = np.mean(err <= th * (rms + np.abs(g)))
    assert rel_l2 < th, f"{what}: relative L2 error {rel_l2:.3g} >= {th:.3g}"
    assert frac >= 0.99, f"{what}: only {frac:.4f} of elements within the mixed tolerance"
    assert np.all(err < np.maximum(0.1 * rms, 32 * _ulp(g, dtype))), f"{what}: max abs error {err.max():.3g}"


def _close(actual, golden, rtol, what=""):
    """max |a - g| <= rtol * max |g| (normwise, for float64-vs-float64 comparisons)."""
    a, g = np.asarray(actual, np.float64), np.asarray(golden, np.float64)
    assert a.shape == g.shape, f"{what}: shape {a.shape} != {g.shape}"
    err, ref = np.abs(a - g).max(), np.abs(g).max()
    assert err <= rtol * ref, f"{what}: max err {err:.3g} > {rtol:g} * {ref:.3g}"


# ------------------------------------------------------------------------------------------------
# forward
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASE_PARAMS)
def test_forward_exact_matches_oracle(case):
    """Exact-mode forward == float64 oracle (O, 8-copy max/sum) to 1e-9 relative (§2.1-2.4)."""
    c = _make(case)
    inputs, attrs = _fwd_args(c)
    r = interpret(FWD, inputs, attrs, mode="exact")
    ref = _oracle_fwd(c)
    for name in ("attention_out", "softmax_max", "softmax_sum"):
        assert r[name].dtype == np.float64
        _close(r[name], ref[name], 1e-9, name)
    assert np.all(r["softmax_max"] == r["softmax_max"][..., :1])


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_forward_device_precision(case):
    """Device fwd: stats within CANN fp32 of float64; O MERE < Th(T) vs P-rounded golden, close to float64 (§2.4)."""
    c = _make(case)
    inputs, attrs = _fwd_args(c)
    r = interpret(FWD, inputs, attrs, mode="device")
    ref = _oracle_fwd(c)
    assert r["attention_out"].dtype == NP_T[c["dtype"]]
    assert r["softmax_max"].dtype == r["softmax_sum"].dtype == np.float32
    assert_cann_precision(r["softmax_max"], ref["softmax_max"], "float32", "softmax_max")
    assert_cann_precision(r["softmax_sum"], ref["softmax_sum"], "float32", "softmax_sum")
    mere, _ = mere_mare(r["attention_out"], _fwd_quant_golden(c))
    assert mere < THRESHOLD[c["dtype"]], f"attention_out vs P-rounded golden: MERE {mere:.3g}"
    _assert_device_close(r["attention_out"], ref["attention_out"], c["dtype"], "attention_out vs float64")


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_forward_device_cann_precision_positive_values(case):
    """With value > 0, O = sum P_l V_l has no near-zero element: full CANN MERE/MARE by T vs float64 (§2.4)."""
    c = _make(case)
    c["v"] = (np.abs(np.asarray(c["v"], np.float32)) + 0.5).astype(NP_T[c["dtype"]])
    r = interpret(FWD, *_fwd_args(c), mode="device")
    ref = _oracle_fwd(c)
    assert_cann_precision(r["attention_out"], ref["attention_out"], c["dtype"], "attention_out")
    assert_cann_precision(r["softmax_sum"], ref["softmax_sum"], "float32", "softmax_sum")


@pytest.mark.parametrize("mode", ["exact", "device"])
def test_forward_sparse2_needs_mask_tensor(mode):
    """sparse_mode 2 without atten_mask is unmasked; with any mask (values ignored) it is causal (§2.3)."""
    c = _make(CASES[0])
    inputs, attrs = _fwd_args(c, mask=False)
    nomask = interpret(FWD, inputs, attrs, mode=mode)
    ref0, ref2 = _oracle_fwd(c, mode=0), _oracle_fwd(c, mode=2)
    tol = 1e-9 if mode == "exact" else 2.0**-10
    _close(nomask["attention_out"], ref0["attention_out"], tol, "sparse2 no mask vs unmasked")
    assert np.abs(ref0["attention_out"] - ref2["attention_out"]).max() > 0.1   # masking matters here
    outs = []
    for mask in (np.zeros((3, 5), np.bool_), np.ones((2048, 2048), np.bool_)[:7, :9], np.full((2, 2), 7, np.uint8)):
        inputs["atten_mask"] = mask
        outs.append(interpret(FWD, inputs, attrs, mode=mode))
        _close(outs[-1]["attention_out"], ref2["attention_out"], tol, "sparse2 with mask vs causal")
    for o in outs[1:]:
        for k in o:
            assert np.array_equal(np.asarray(o[k], np.float64), np.asarray(outs[0][k], np.float64))


def test_forward_duplicate_block_counts_twice():
    """topk [a, a] doubles softmax_sum and keeps max and O of topk [a] (§2.2 duplicates gathered twice)."""
    base = Case("dup", 4, 2, 32, 16, 16, 1, (6, 10), (48, 64), "float16", 0)
    c1 = _make(base, seed=3)
    c2 = dict(c1, topk=np.repeat(c1["topk"], 2, axis=2), cnt=2)
    r1 = interpret(FWD, *_fwd_args(c1), mode="exact")
    r2 = interpret(FWD, *_fwd_args(c2), mode="exact")
    _close(r2["softmax_sum"], 2 * r1["softmax_sum"], 1e-12, "sum")
    _close(r2["softmax_max"], r1["softmax_max"], 1e-12, "max")
    _close(r2["attention_out"], r1["attention_out"], 1e-12, "out")


# ------------------------------------------------------------------------------------------------
# backward
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASE_PARAMS)
def test_backward_exact_matches_formula_with_given_o(case):
    """Exact backward == float64 §2.5 formula using the GIVEN O_T and fp32 stats, 1e-9 relative (§2.5)."""
    c = _make(case)
    o, mx, sm = _given(case)
    r = _exact_bwd(case)
    ref, _ = _bwd_formula(c, o, mx, sm)
    for name in ("dq", "dk", "dv"):
        _close(r[name], ref[name], 1e-9, name)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_backward_exact_vs_autograd_within_rounding_bound(case):
    """Exact backward vs float64 autograd stays inside the bound from rounding O to T and stats to fp32 (§2.5)."""
    c = _make(case)
    o, mx, sm = _given(case)
    r = _exact_bwd(case)
    ref = _oracle_grad(c)
    _, aux = _bwd_formula(c, o, mx, sm)
    tol = _autograd_bound(c, o, mx, aux)
    for name in ("dq", "dk", "dv"):
        diff = np.abs(r[name] - ref[name])
        slack = 1e-12 * np.abs(ref[name]).max()
        worst = np.max(diff - tol[name])
        assert worst <= slack, f"{name}: exceeds rounding bound by {worst:.3g}"
        # the bound is informative (measured tol/max|g| <= 43 u_T, actual diff <= 1.7 u_T * max|g|)
        assert tol[name].max() < 64 * U_T[c["dtype"]] * np.abs(ref[name]).max(), name


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_backward_device_vs_exact(case):
    """Device backward vs exact: rel. L2 < Th(T), mixed tolerance, and P/dS rounded at the §2.5 points (module doc)."""
    c = _make(case)
    ex = _exact_bwd(case)
    dev = interpret(BWD, *_bwd_args(c, *_given(case)), mode="device")
    quant, _ = _bwd_formula(c, *_given(case), quant=True)
    for name in ("dq", "dk", "dv"):
        assert dev[name].dtype == NP_T[c["dtype"]]
        _assert_device_close(dev[name], ex[name], c["dtype"], name)
        # P and dS are rounded to T where §2.5 says: the device is closer to the golden that rounds there
        # (measured ratio 0.63-0.76; 1.37-1.53 for dq/dk when dS is not rounded)
        a = np.asarray(dev[name], np.float64)
        ratio = np.linalg.norm(a - quant[name]) / np.linalg.norm(a - ex[name])
        assert ratio < 0.9, f"{name}: error vs P/dS-rounded golden / error vs exact = {ratio:.2f}"


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_backward_device_dv_cann_positive_grad(case):
    """With dO > 0, dv = P^T dO has no cancellation: full CANN MERE/MARE by T vs exact mode (§2.5)."""
    c = _make(case)
    c["do"] = (np.abs(np.asarray(c["do"], np.float32)) + 0.5).astype(NP_T[c["dtype"]])
    inputs, attrs = _bwd_args(c, *_given(case))
    ex = interpret(BWD, inputs, attrs, mode="exact")
    dev = interpret(BWD, inputs, attrs, mode="device")
    assert_cann_precision(dev["dv"], ex["dv"], c["dtype"], "dv")


CHAIN = [CASES[i] for i in (0, 1, 2, 4, 5, 7)]   # (as parametrized below)


@pytest.mark.parametrize("case", [CASE_PARAMS[i] for i in (0, 1, 2, 4, 5, 7)])
def test_chain_device_forward_into_device_backward(case):
    """Device forward O/max/sum fed to the device backward: rel. L2 < Th(T) vs float64 autograd chain (§2.4-2.5)."""
    c = _make(case)
    f = interpret(FWD, *_fwd_args(c), mode="device")
    dev = interpret(BWD, *_bwd_args(c, f["attention_out"], f["softmax_max"], f["softmax_sum"]), mode="device")
    ref = _oracle_grad(c)
    th = THRESHOLD[c["dtype"]]
    for name in ("dq", "dk", "dv"):
        a = np.asarray(dev[name], np.float64)
        assert np.isfinite(a).all(), name
        rel = np.linalg.norm(a - ref[name]) / np.linalg.norm(ref[name])
        assert rel < th, f"{name}: relative L2 error {rel:.3g} >= {th:.3g}"


# ------------------------------------------------------------------------------------------------
# backward masking, duplicates, unselected rows
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["exact", "device"])
def test_backward_sparse2_masks_without_mask_tensor(mode):
    """Backward masks iff sparseMode == 2, whatever attenMsk is (null or any tensor) (§2.3, §1.2)."""
    case = CASES[0]
    c = _make(case)
    o, mx, sm = _given(case)
    inputs, attrs = _bwd_args(c, o, mx, sm)
    r_null = interpret(BWD, inputs, attrs, mode=mode)
    masked, _ = _bwd_formula(c, o, mx, sm)
    unmasked, _ = _bwd_formula(dict(c, mode=0), o, mx, sm)
    tol = 1e-9 if mode == "exact" else THRESHOLD[c["dtype"]]
    for name in ("dq", "dk", "dv"):
        _close(r_null[name], masked[name], tol, name)
        assert np.abs(masked[name] - unmasked[name]).max() > 0.05 * np.abs(masked[name]).max(), name
    for mask in (np.zeros((2, 3), np.bool_), np.ones((2048, 2048), np.bool_)[:5, :5]):
        r = interpret(BWD, dict(inputs, attenMsk=mask), attrs, mode=mode)
        for name in r:
            assert np.array_equal(np.asarray(r[name], np.float64), np.asarray(r_null[name], np.float64)), name
    r0 = interpret(BWD, dict(inputs, attenMsk=np.ones((4, 4), np.bool_)), dict(attrs, sparseMode=0), mode=mode)
    for name in r0:
        _close(r0[name], unmasked[name], tol, name + " (sparseMode 0 with a mask tensor)")


@pytest.mark.parametrize("mode", ["exact", "device"])
def test_backward_unselected_rows_are_zero(mode):
    """dk/dv rows never selected are exactly 0, every selected dv row is nonzero (§2.5 last bullet, §2.2)."""
    case = CASES[0]
    c = _make(case)
    inputs, attrs = _bwd_args(c, *_given(case))
    r = interpret(BWD, inputs, attrs, mode=mode)
    rows, vis = _plan(c)
    sel = np.zeros(c["k"].shape[:2], bool)
    sel[rows[vis], np.broadcast_to(np.arange(rows.shape[1])[None, :, None], rows.shape)[vis]] = True
    assert (~sel).sum() > 50 and sel.sum() > 50
    for name in ("dk", "dv"):
        assert np.all(np.asarray(r[name], np.float64)[~sel] == 0), name
    assert np.all(np.abs(np.asarray(r["dv"], np.float64)[sel]).max(-1) > 0)


def test_backward_duplicate_block_equals_single():
    """topk [a, a] (each copy gets P/2, gradients accumulate twice) gives the gradients of topk [a] (§2.2, §2.5)."""
    base = Case("dup", 4, 2, 32, 16, 16, 1, (6, 10), (48, 64), "float16", 0)
    c1 = _make(base, seed=4)
    c2 = dict(c1, topk=np.repeat(c1["topk"], 2, axis=2), cnt=2)
    o1, mx1, sm1 = _given_fwd(c1)
    o2, mx2, sm2 = _given_fwd(c2)
    assert np.array_equal(np.asarray(o1, np.float64), np.asarray(o2, np.float64))
    r1 = interpret(BWD, *_bwd_args(c1, o1, mx1, sm1), mode="exact")
    r2 = interpret(BWD, *_bwd_args(c2, o2, mx2, sm2), mode="exact")
    for name in ("dq", "dk", "dv"):
        _close(r2[name], r1[name], 1e-12, name)
        assert np.abs(r1[name]).max() > 0.1


# ------------------------------------------------------------------------------------------------
# validation (value checks of §2.3/§2.6 and the stricter-than-CANN rules of the spec docstrings)
# ------------------------------------------------------------------------------------------------
def test_fully_masked_row_rejected_only_when_masking():
    """All-future row rejected iff masking is on: bwd sparseMode 2; fwd sparse_mode 2 with a mask (§2.3, §2.4)."""
    case = CASES[0]
    c = _make(case)
    topk = c["topk"].copy()
    topk[1] = 1                              # token 1 (position 1) selects only block 1 = keys 16..31
    c = dict(c, topk=topk)
    with pytest.raises(ValidationError) as e:
        interpret(BWD, *_bwd_args(c, *_given(case)), mode="exact")
    assert e.value.param == "topkIndices"
    with pytest.raises(ValidationError) as e:
        interpret(FWD, *_fwd_args(c, mask=True), mode="exact")
    assert e.value.param == "topk_indices"
    r = interpret(FWD, *_fwd_args(c, mask=False), mode="exact")          # unmasked: legal
    _close(r["attention_out"], _oracle_fwd(c, mode=0)["attention_out"], 1e-9)


def test_block_outside_batch_rejected():
    """An index whose block crosses its batch's kv end is rejected in both directions (§2.2, spec checks)."""
    case = CASES[0]
    c = _make(case)
    topk = c["topk"].copy()
    topk[0, 0, -1] = 70 // 16                # batch 0 has 70 keys: block 4 = keys 64..79 crosses the end
    c = dict(c, topk=topk)
    with pytest.raises(ValidationError) as e:
        interpret(FWD, *_fwd_args(c), mode="device")
    assert e.value.param == "topk_indices"
    with pytest.raises(ValidationError) as e:
        interpret(BWD, *_bwd_args(c, *_given(case)), mode="device")
    assert e.value.param == "topkIndices"


def test_backward_rejects_block_count_above_128():
    """Backward selectedBlockCount is bounded: CANN's general template takes [1, 32] (§3.4 H2); opgen's backward
    allows up to 128 within the 8K selected-keys bound and must reject 129."""
    base = Case("c129", 2, 1, 32, 16, 16, 129, (4, 4), (2100, 2200), "float16", 0)
    c = _make(base)
    o, mx, sm = _given_fwd(c)
    with pytest.raises(ValidationError) as e:
        interpret(BWD, *_bwd_args(c, o, mx, sm), mode="exact")
    assert e.value.param in ("selectedBlockCount", "topkIndices")


def test_backward_reads_only_column_0_of_stats():
    """Only column 0 of the 8-wide softmaxMax/softmaxSum is used (§2.5 'column 0 of the 8-wide stats')."""
    case = CASES[5]
    c = _make(case)
    o, mx, sm = _given(case)
    ref = _exact_bwd(case)
    junk = np.random.default_rng(9).standard_normal(mx.shape).astype(np.float32)
    mx2, sm2 = mx.copy(), sm.copy()
    mx2[..., 1:], sm2[..., 1:] = junk[..., 1:], np.abs(junk[..., 1:]) + 5
    r = interpret(BWD, *_bwd_args(c, o, mx2, sm2), mode="exact")
    for name in ref:
        assert np.array_equal(r[name], ref[name]), name


# ------------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------------
def test_cli_interpret_grad_with_dims(tmp_path):
    """`opgen interpret NsaSelectedAttentionGrad --dims ...` writes right-shaped dq/dk/dv matching §2.5 (§1.2)."""
    out, saved = tmp_path / "X.npz", tmp_path / "in.npz"
    cmd = ["interpret", "NsaSelectedAttentionGrad", "--dims", "T1=64,T2=512,N1=8,N2=2,D=192,Dv=128,Bn=2,CNT=4",
           "--attr", "selectedBlockSize=64", "--attr", "selectedBlockCount=4", "--attr", "headNum=8",
           "--attr", "sparseMode=2", "--dtype", "T=float16", "--out", str(out), "--save-inputs", str(saved)]
    p = cli(*cmd)
    assert p.returncode == 0, p.stderr
    with np.load(out) as z:
        res = {k: z[k] for k in z.files}
    assert set(res) == {"dq", "dk", "dv"}
    assert res["dq"].shape == (64, 8, 192) and res["dk"].shape == (512, 2, 192) and res["dv"].shape == (512, 2, 128)
    assert all(a.dtype == np.float32 and np.isfinite(a).all() for a in res.values())
    with np.load(saved) as z:
        x = {k: z[k] for k in z.files}
    assert x["topkIndices"].shape == (64, 2, 4) and list(x["actualSeqQLen"]) == [32, 64]
    # the saved attentionOut/softmax stats are the device forward's; with the default scaleValue 1.0 and D=192
    # the softmax is near one-hot, so the O rounding moves autograd's dq/dk by ~Th (measured 0.99e-3): compare
    # dq/dk with the §2.5 formula on the saved O/stats, and dv (independent of O) with autograd.
    f16 = {k: x[k].astype(np.float16) for k in ("query", "key", "value", "attentionOutGrad", "attentionOut")}
    c = dict(q=f16["query"], k=f16["key"], v=f16["value"], do=f16["attentionOutGrad"], topk=x["topkIndices"],
             cu_q=x["actualSeqQLen"], cu_kv=x["actualSeqKVLlen"], bs=64, cnt=4, n1=8, dtype="float16", mode=2,
             scale=1.0)
    golden, _ = _bwd_formula(c, f16["attentionOut"], x["softmaxMax"], x["softmaxSum"])
    golden["dv"] = _oracle_grad(c)["dv"]
    for name in ("dq", "dk", "dv"):
        rel = np.linalg.norm(res[name] - golden[name]) / np.linalg.norm(golden[name])
        assert rel < THRESHOLD["float16"], f"{name}: relative L2 {rel:.3g}"
