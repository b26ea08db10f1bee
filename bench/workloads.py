"""The workloads `opgen bench` measures: which operators, at which sizes, against what (loaded from here by
opgen.bench.load_workloads, so the benchmark harness in opgen/bench knows no operator).

INTERP       device-mode interpretation vs a direct NumPy implementation of the same math (the functions below)
EMU_TIME     the emulated kernel vs the interpreter on the README's real-sized cases
GM           GM bytes counted by the emulation over the minimum: AdaLayerNormGrad over H, NormRopeConcatGrad in
             every rope/norm mode, and the example operators of examples/specs at real sizes; a case
             with golden=False is launched without the float64 golden (its interpretation would not fit the machine)
             and its device-mode interpretation is timed on its own (time_interp)
STARTUP      `opgen interpret` as a whole process vs a NumPy-only script with the same npz I/O (numpy_ada_grad)
NSA_GM       the NSA pair next to the gather minimum (`gather_min_bytes`) and the reference's CANN estimate
QUICK        the rows of INTERP, EMU_TIME, GM, NSA_GM and NSA_RUNS that `opgen bench --quick` keeps, and the op it generates
CHECK        `opgen check` (build cached) vs `opgen interpret` of the same case as whole processes, and check's peak
             resident memory over the inputs and outputs
"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np

from opgen.interp import round_to
from opgen.ir.dtypes import DType

BF16 = ml_dtypes.bfloat16
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "specs"


def numpy_ada_grad(dy, x, rstd, mean, scale, gamma, beta):
    """AdaLayerNormGrad in fp32 NumPy (docs/reference/ada_layer_norm.md §1.2), bf16 outputs (RNE)."""
    dy = dy.astype(np.float32)
    x = x.astype(np.float32)
    s1 = scale.astype(np.float32)[:, None, :] + np.float32(1)
    g32, b32 = gamma.astype(np.float32), beta.astype(np.float32)
    z = (x - mean) * rstd
    dys = dy * s1
    g = dys * g32
    pd_x = rstd * (g - g.mean(-1, keepdims=True) - z * (g * z).mean(-1, keepdims=True))
    pd_scale = (dy * (z * g32 + b32)).sum(1)
    pd_shift = dy.sum(1)
    return {"pd_x": pd_x.astype(BF16), "pd_scale": pd_scale.astype(BF16), "pd_shift": pd_shift.astype(BF16),
            "pd_gamma": (dys * z).sum((0, 1)).astype(BF16), "pd_beta": dys.sum((0, 1)).astype(BF16)}


def numpy_nrc_grad(inp):
    """NormRopeConcatGrad (norm 2/2, half RoPE, concat_order 1) in fp32 NumPy, bf16 outputs (ties-away)."""
    f = {k: (v.astype(np.float32) if v is not None else None) for k, v in inp.items()}
    sin, cos = f["rope_sin"], f["rope_cos"]
    R, D = sin.shape
    h = D // 2
    out = {}

    def rope_t(g):
        g = g.copy()
        head = g[:, :, :R]
        gs = head * sin
        rot = np.concatenate([gs[..., h:], -gs[..., :h]], -1)
        g[:, :, :R] = head * cos + rot
        return g.transpose(0, 2, 1, 3)

    def ln_bwd(d, x, mean, rstd, w, name):
        xh = (x - mean) * rstd
        out[f"grad_{name}_weight"] = (d * xh).sum((0, 1, 2))
        out[f"grad_{name}_bias"] = d.sum((0, 1, 2))
        d = d * w
        return rstd * (d - d.mean(-1, keepdims=True) - xh * (d * xh).mean(-1, keepdims=True))

    seq, sek = f["encoder_query"].shape[1], f["encoder_key"].shape[1]
    gq = rope_t(f["grad_query_output"])
    gk = rope_t(f["grad_key_output"])
    gv = f["grad_value_output"].transpose(0, 2, 1, 3)
    out["grad_query"] = ln_bwd(gq[:, seq:], f["query"], f["norm_query_mean"], f["norm_query_rstd"],
                               f["norm_query_weight"], "norm_query")
    out["grad_key"] = ln_bwd(gk[:, sek:], f["key"], f["norm_key_mean"], f["norm_key_rstd"], f["norm_key_weight"],
                             "norm_key")
    out["grad_value"] = gv[:, sek:]
    out["grad_encoder_query"] = ln_bwd(gq[:, :seq], f["encoder_query"], f["norm_added_query_mean"],
                                       f["norm_added_query_rstd"], f["norm_added_query_weight"], "norm_added_query")
    out["grad_encoder_key"] = ln_bwd(gk[:, :sek], f["encoder_key"], f["norm_added_key_mean"],
                                     f["norm_added_key_rstd"], f["norm_added_key_weight"], "norm_added_key")
    out["grad_encoder_value"] = gv[:, :sek]
    return {k: round_to(v, DType.bf16, "round") for k, v in out.items()}


def numpy_nsa_grad(inp, scale=0.08, causal=True):
    """NsaSelectedAttentionGrad in fp32 NumPy (docs/reference/nsa_selected_attention.md §2: gather the selected
    key blocks per (token, kv head), S = Q Kᵀ·scale, causal mask, P from the saved max/sum, dS = P (dP -
    rowsum(dO O)), P and dS rounded to bf16 (ties-away), dK/dV scatter-added), bf16 outputs."""
    f = {k: np.asarray(v) for k, v in inp.items()}
    q, k, v = (f[n].astype(np.float32) for n in ("query", "key", "value"))
    o, do = f["attentionOut"].astype(np.float32), f["attentionOutGrad"].astype(np.float32)
    topk = f["topkIndices"].astype(np.int64)
    cu_q, cu_kv = f["actualSeqQLen"].astype(np.int64), f["actualSeqKVLlen"].astype(np.int64)
    T1, N1, D = q.shape
    T2, N2, Dv = v.shape
    G, CNT = N1 // N2, topk.shape[2]
    BS = int(inp["_bs"])
    batch = np.searchsorted(cu_q, np.arange(T1), side="right")
    q0 = np.concatenate([[0], cu_q])[batch]
    kv0 = np.concatenate([[0], cu_kv])[batch]
    s = np.arange(T1) - q0
    pos = (topk[..., None] * BS + np.arange(BS)).reshape(T1, N2, CNT * BS)          # [T1, N2, L]
    rows = pos + kv0[:, None, None]
    heads = np.arange(N2)[None, :, None]
    ksel, vsel = k[rows, heads], v[rows, heads]                                      # [T1, N2, L, D]
    qg, og, dog = q.reshape(T1, N2, G, D), o.reshape(T1, N2, G, Dv), do.reshape(T1, N2, G, Dv)
    sc = (qg @ ksel.transpose(0, 1, 3, 2)) * np.float32(scale)
    if causal:
        sc = np.where((pos > s[:, None, None])[:, :, None, :], np.float32(-3.4028235e38), sc)
    m = f["softmaxMax"][..., :1].reshape(T1, N2, G, 1)
    lsum = f["softmaxSum"][..., :1].reshape(T1, N2, G, 1)
    p = np.exp(sc - m) / lsum
    dp = dog @ vsel.transpose(0, 1, 3, 2)
    ds = round_to((p * (dp - (dog * og).sum(-1, keepdims=True))).astype(np.float32), DType.bf16, "round")
    p = round_to(p.astype(np.float32), DType.bf16, "round")
    dq = (ds @ ksel).reshape(T1, N1, D) * np.float32(scale)
    flat = (rows * N2 + heads).ravel()
    dk = _scatter_rows(flat, (ds.transpose(0, 1, 3, 2) @ qg).reshape(-1, D), T2 * N2).reshape(T2, N2, D)
    dk *= np.float32(scale)
    dv = _scatter_rows(flat, (p.transpose(0, 1, 3, 2) @ dog).reshape(-1, Dv), T2 * N2).reshape(T2, N2, Dv)
    return {"dq": round_to(dq, DType.bf16, "round"), "dk": round_to(dk, DType.bf16, "round"),
            "dv": round_to(dv, DType.bf16, "round")}


def _scatter_rows(index, rows, n):
    """out[index[i]] += rows[i] (fp32, [n, width]) by sorting and np.add.reduceat (np.add.at is slow)."""
    order = np.argsort(index, kind="stable")
    idx, vals = index[order], rows[order]
    starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
    out = np.zeros((n, rows.shape[1]), np.float32)
    out[idx[starts]] = np.add.reduceat(vals, starts, axis=0)
    return out


NSA_DIMS = {"T1": 512, "T2": 512, "Bn": 2, "N1": 64, "N2": 4, "D": 192, "Dv": 128, "CNT": 16, "BS": 64}
NSA_ATTRS = {"scaleValue": 0.08, "sparseMode": 2, "selectedBlockSize": 64, "selectedBlockCount": 16, "headNum": 64}

INTERP = {
    "AdaLayerNormGrad x[2,1024,1152] bf16": dict(
        op="AdaLayerNormGrad", dims={"Bd": (2,), "S": 1024, "H": 1152}, attrs={}, dtypes={"T": "bfloat16"},
        numpy=lambda i: numpy_ada_grad(**i)),
    "NormRopeConcatGrad Flux B=1 S=4096+512 N=24 D=128 bf16": dict(
        op="NormRopeConcatGrad",
        dims={"B": 1, "Sq": 4096, "Seq": 512, "Sk": 4096, "Sek": 512, "N": 24, "D": 128, "R": 4608},
        attrs={"norm_type": 2, "norm_added_type": 2, "rope_type": 2, "concat_order": 1}, dtypes={"T": "bfloat16"},
        numpy=numpy_nrc_grad),
    "NsaSelectedAttentionGrad T=2x256 G=16 D=192/128 16x64 keys bf16": dict(
        op="NsaSelectedAttentionGrad", dims=NSA_DIMS, attrs=NSA_ATTRS, dtypes={"T": "bfloat16"},
        numpy=lambda i: numpy_nsa_grad({**i, "_bs": 64})),
}


STARTUP = dict(  # the whole-process `opgen interpret` case (opgen.bench.startup): the README's DiT-sized backward
    op="AdaLayerNormGrad", dims={"Bd": (2,), "S": 1024, "H": 1152}, quick_dims={"Bd": (2,), "S": 64, "H": 1152},
    attrs={}, dtypes={"T": "bfloat16"}, numpy="numpy_ada_grad")

INTERP_QUICK = {  # smoke-run sizes (`--quick`)
    "AdaLayerNormGrad": {"Bd": (2,), "S": 64, "H": 1152},
    "NormRopeConcatGrad": {"B": 1, "Sq": 256, "Seq": 32, "Sk": 256, "Sek": 32, "N": 24, "D": 128, "R": 288},
    "NsaSelectedAttentionGrad": {**NSA_DIMS, "T1": 16, "T2": 2048, "Bn": 2},   # T2: 2 batches x the 16 x 64 keys
}


EMU_TIME = [
    ("AdaLayerNormGrad DiT [2, 1024, 1152] bf16", "AdaLayerNormGrad", {"Bd": (2,), "S": 1024, "H": 1152},
     {}, {"T": "bfloat16"}),
    ("NormRopeConcatGrad Flux bf16", "NormRopeConcatGrad",
     {"B": 1, "Sq": 4096, "Seq": 512, "Sk": 4096, "Sek": 512, "N": 24, "D": 128, "R": 4608},
     {"norm_type": 2, "norm_added_type": 2, "rope_type": 2, "concat_order": 1}, {"T": "bfloat16"}),
]
GM_HIDDEN = [64, 1152, 3072, 4099, 8192, 16384]
# CANN's AdaLayerNormGrad kernels, bytes moved / minimum (docs/reference/ada_layer_norm.md §4.5, bf16 rows)
CANN_GM = {64: "~1.05x", 1152: "~1.2x", 3072: "2.7x", 4099: "~7-8x", 8192: "~7-8x", 16384: "~7-8x"}



GM = [{"op": "AdaLayerNormGrad", "case": f"H={h}, 4096 rows", "H": h, "dims": {"Bd": (2,), "S": 2048, "H": h},
       "quick_dims": {"Bd": (2,), "S": 256, "H": h}, "dtypes": {"T": "bfloat16", "U": "bfloat16"}, "cann": CANN_GM[h]}
      for h in GM_HIDDEN]
NRC_FLUX = {"B": 1, "Sq": 4096, "Seq": 512, "Sk": 4096, "Sek": 512, "N": 24, "D": 128, "R": 4608}


GM += [{"op": "NormRopeConcatGrad", "case": f"Flux, norm {n}/{n}, rope {r}", "dims": NRC_FLUX,
        "quick_dims": {k: (max(1, v // 16) if k in ("Sq", "Seq", "Sk", "Sek", "R") else v) for k, v in NRC_FLUX.items()},
        "attrs": {"norm_type": n, "norm_added_type": n, "rope_type": r, "concat_order": 0}, "dtypes": {"T": "bfloat16"},
        "cann": "docs/reference/norm_rope_concat.md §5"} for n in (0, 1, 2) for r in (0, 1, 2)]
# the example operators at real sizes: goal <= 1.10 each, the emulated kernel timed against the interpreter
GM += [
    {"op": str(EXAMPLES / "rms_norm.py"), "case": "RmsNorm [4096, 4096] bf16", "dims": {"Bd": (4096,), "H": 4096},
     "quick_dims": {"Bd": (256,), "H": 4096}, "dtypes": {"T": "bfloat16"}, "time_interp": True},
    {"op": str(EXAMPLES / "rms_norm.py"), "case": "RmsNorm [4096, 8192] bf16", "dims": {"Bd": (4096,), "H": 8192},
     "quick_dims": {"Bd": (128,), "H": 8192}, "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "add_rms_norm.py"), "case": "AddRmsNorm [4096, 8192] bf16",
     "dims": {"Bd": (4096,), "H": 8192}, "quick_dims": {"Bd": (128,), "H": 8192}, "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "layer_norm_grad.py"), "case": "LayerNormGradV3 [4096, 4096] bf16, fp32 gamma",
     "dims": {"Bd": (4096,), "H": 4096}, "quick_dims": {"Bd": (128,), "H": 4096},
     "dtypes": {"T": "bfloat16", "U": "float32"}},
    {"op": str(EXAMPLES / "softmax.py"), "case": "SoftmaxV2 [8192, 32000] fp16", "dims": {"Bd": (8192,), "H": 32000},
     "quick_dims": {"Bd": (64,), "H": 32000}, "dtypes": {"T": "float16"}, "golden": False, "time_interp": True},
    {"op": str(EXAMPLES / "layer_norm_grad.py"), "case": "LayerNormGradV3 [4096, 1152] bf16",
     "dims": {"Bd": (4096,), "H": 1152}, "quick_dims": {"Bd": (256,), "H": 1152},
     "dtypes": {"T": "bfloat16", "U": "bfloat16"}, "time_interp": True},
    {"op": str(EXAMPLES / "layer_norm_grad.py"), "case": "LayerNormGradV3 [4096, 8192] bf16",
     "dims": {"Bd": (4096,), "H": 8192}, "quick_dims": {"Bd": (128,), "H": 8192},
     "dtypes": {"T": "bfloat16", "U": "bfloat16"}, "time_interp": True},
    {"op": str(EXAMPLES / "swiglu.py"), "case": "SwiGlu [4096, 2 x 11008] bf16", "dims": {"Bd": (4096,), "H": 11008},
     "quick_dims": {"Bd": (128,), "H": 11008}, "dtypes": {"T": "bfloat16"}, "time_interp": True},
    {"op": str(EXAMPLES / "swiglu.py"), "case": "SwiGlu dim 0 [2 x 4096, 8, 1376] bf16",
     "dims": {"Bd": (8, 1376), "H": 4096}, "quick_dims": {"Bd": (8, 1376), "H": 64}, "attrs": {"dim": 0},
     "dtypes": {"T": "bfloat16"}},
    # row-wise operators of ops-nn's catalogue (compare / select, integer outputs, reductions over leading axes and
    # to a scalar, rows longer than most UBs)
    {"op": str(EXAMPLES / "leaky_relu.py"), "case": "LeakyRelu [4096, 4096] bf16", "dims": {"Bd": (4096, 4096)},
     "quick_dims": {"Bd": (64, 4096)}, "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "masked_fill.py"), "case": "MaskedFill [4096, 4096] fp16, bool mask",
     "dims": {"N": 4096, "H": 4096}, "quick_dims": {"N": 64, "H": 4096}, "dtypes": {"T": "float16"}},
    {"op": str(EXAMPLES / "smooth_l1_loss.py"), "case": "SmoothL1Loss [4096, 4096] bf16",
     "dims": {"Bd": (4096,), "H": 4096}, "quick_dims": {"Bd": (64,), "H": 4096}, "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "dynamic_quant.py"), "case": "DynamicQuant [4096, 4096] fp16 -> int8 + fp32 scale",
     "dims": {"Bd": (4096,), "H": 4096}, "quick_dims": {"Bd": (64,), "H": 4096}, "dtypes": {"T": "float16"}},
    {"op": str(EXAMPLES / "scaled_masked_softmax.py"), "case": "ScaledMaskedSoftmax [4096, 2048] fp16",
     "dims": {"Bd": (4096,), "H": 2048}, "quick_dims": {"Bd": (64,), "H": 2048}, "dtypes": {"T": "float16"}},
    {"op": str(EXAMPLES / "log_softmax.py"), "case": "LogSoftmaxV2 [4096, 4096] bf16",
     "dims": {"Bd": (4096,), "H": 4096}, "quick_dims": {"Bd": (64,), "H": 4096}, "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "softmax.py"), "case": "SoftmaxV2 [48, 262144] fp32",
     "dims": {"Bd": (48,), "H": 262144}, "quick_dims": {"Bd": (2,), "H": 262144}, "dtypes": {"T": "float32"}},
    # a core's slice longer than UB: COL_STREAM reads x twice (the online maximum and sum, then y), bound 1.5
    # (docs/design.md)
    {"op": str(EXAMPLES / "softmax.py"), "case": "SoftmaxV2 [8, 786432] fp32, streamed (bound 1.5)",
     "dims": {"Bd": (8,), "H": 786432}, "quick_dims": {"Bd": (2,), "H": 786432}, "dtypes": {"T": "float32"}},
    {"op": str(EXAMPLES / "log_softmax.py"), "case": "LogSoftmaxV2 [8, 1048576] bf16, streamed (bound 1.5)",
     "dims": {"Bd": (8,), "H": 1048576}, "quick_dims": {"Bd": (2,), "H": 1048576}, "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "reduce_mean.py"), "case": "ReduceMean [32, 1024, 1024] bf16 over the middle axis",
     "dims": {"Bd": (32,), "M": 1024, "H": 1024}, "quick_dims": {"Bd": (2,), "M": 64, "H": 1024},
     "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "mse_loss.py"), "case": "MseLoss [4096, 4096] bf16 to a scalar mean",
     "dims": {"Bd": (4096,), "H": 4096}, "quick_dims": {"Bd": (64,), "H": 4096}, "attrs": {"reduction": 1},
     "dtypes": {"T": "bfloat16"}},
    # a core's column slice of 65536 rows is longer than UB: the statistics pass and the normalising pass each read
    # x (the examples/specs/batch_norm.py schedule), bound 1.5 (two reads and one write over one read and one write)
    {"op": str(EXAMPLES / "batch_norm.py"), "case": "BatchNorm training [65536, 512] fp32, two passes (bound 1.5)",
     "dims": {"N": 65536, "C": 512}, "quick_dims": {"N": 512, "C": 512}, "dtypes": {"T": "float32"}},
    {"op": str(EXAMPLES / "group_norm.py"), "case": "GroupNorm [32, 320, 64 x 64] bf16, 32 groups",
     "dims": {"N": 32, "C": 320, "HxW": 4096, "G": 32}, "quick_dims": {"N": 2, "C": 320, "HxW": 4096, "G": 32},
     "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "cross_entropy_loss.py"), "case": "CrossEntropyLoss [1024, 32000] bf16 (int64 targets)",
     "dims": {"N": 1024, "C": 32000}, "quick_dims": {"N": 64, "C": 32000}, "attrs": {"reduction": "none"},
     "dtypes": {"T": "bfloat16"}, "time_interp": True},
    {"op": str(EXAMPLES / "cross_entropy_loss_grad.py"), "case": "CrossEntropyLossGrad [1024, 32000] bf16",
     "dims": {"N": 1024, "C": 32000}, "quick_dims": {"N": 64, "C": 32000}, "dtypes": {"T": "bfloat16"},
     "time_interp": True},
    # one element of each row of self is read (at its target): the minimum counts it as one 32-byte DMA granule
    # a row (opgen.check.run `_granule_bytes`), the moved bytes as its 2 bytes, so the GM ratio reads below 1
    {"op": str(EXAMPLES / "nll_loss.py"), "case": "NLLLoss [1024, 32000] bf16, reduction sum (int64 targets)",
     "dims": {"N": 1024, "C": 32000}, "quick_dims": {"N": 64, "C": 32000}, "dtypes": {"T": "bfloat16"},
     "time_interp": True},
    # backward operators derived from their forwards (examples/specs/derived/), next to the hand-written ones at the
    # same sizes where an example has one (SoftmaxGrad has none): goal <= 1.10 and within 5% of the hand-written
    # kernel's bytes
    {"op": str(EXAMPLES / "derived" / "cross_entropy_loss_grad.py"),
     "case": "CrossEntropyLossGrad [1024, 32000] bf16, derived (saved logProb)", "dims": {"N": 1024, "C": 32000},
     "quick_dims": {"N": 64, "C": 32000}, "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "derived" / "layer_norm_grad.py"), "case": "LayerNormGrad [4096, 1152] bf16, derived",
     "dims": {"Bd": (4096,), "H": 1152}, "quick_dims": {"Bd": (256,), "H": 1152},
     "dtypes": {"T": "bfloat16", "U": "bfloat16"}},
    {"op": str(EXAMPLES / "rms_norm_grad.py"), "case": "RmsNormGrad [4096, 4096] bf16",
     "dims": {"Bd": (4096,), "H": 4096}, "quick_dims": {"Bd": (256,), "H": 4096}, "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "derived" / "rms_norm_grad.py"), "case": "RmsNormGrad [4096, 4096] bf16, derived",
     "dims": {"Bd": (4096,), "H": 4096}, "quick_dims": {"Bd": (256,), "H": 4096}, "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "swiglu_grad.py"), "case": "SwiGluGrad [1024, 2 x 11008] bf16",
     "dims": {"Bd": (1024,), "H": 11008}, "quick_dims": {"Bd": (64,), "H": 11008}, "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "derived" / "swiglu_grad.py"), "case": "SwiGluGrad [1024, 2 x 11008] bf16, derived",
     "dims": {"Bd": (1024,), "H": 11008}, "quick_dims": {"Bd": (64,), "H": 11008}, "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "derived" / "softmax_grad.py"), "case": "SoftmaxGrad [4096, 4096] fp16, derived",
     "dims": {"Bd": (4096,), "H": 4096}, "quick_dims": {"Bd": (64,), "H": 4096}, "dtypes": {"T": "float16"}},
    # dense attention (a key set of every key): the S / P tiles go through the GM workspace (cube <-> vector), K / V
    # are read once per S1 block of a unit
    {"op": str(EXAMPLES / "flash_attention_score.py"),
     "case": "FlashAttentionScore B 1, N 4, S 1024, D 128 bf16, causal",
     "dims": {"B": 1, "N1": 4, "N2": 4, "S1": 1024, "S2": 1024, "D": 128, "MS1": 1024, "MS2": 1024},
     "quick_dims": {"B": 1, "N1": 4, "N2": 4, "S1": 128, "S2": 128, "D": 128, "MS1": 128, "MS2": 128},
     "attrs": {"sparse_mode": 2, "input_layout": "BNSD", "scale_value": 0.088}, "dtypes": {"T": "bfloat16"}},
    # its backward: S / dP (fp32) and P / dS (T) tiles through the workspace per key chunk, dK / dV added to fp32
    # workspaces, dq / dk / dv finished by a final pass
    {"op": str(EXAMPLES / "flash_attention_score_grad.py"),
     "case": "FlashAttentionScoreGrad B 1, N 4, S 1024, D 128 bf16, causal",
     "dims": {"B": 1, "N1": 4, "N2": 4, "S1": 1024, "S2": 1024, "D": 128, "MS1": 1024, "MS2": 1024},
     "quick_dims": {"B": 1, "N1": 4, "N2": 4, "S1": 128, "S2": 128, "D": 128, "MS1": 128, "MS2": 128},
     "attrs": {"sparse_mode": 2, "input_layout": "BNSD", "scale_value": 0.088}, "dtypes": {"T": "bfloat16"}},
    # the cube family at real sizes: GM bytes over the minimum and cube utilisation (useful / issued MACs, the
    # roofline table); the float64 golden of a 4096^3 product is left out (its interpretation is timed on its own)
    {"op": str(EXAMPLES / "mat_mul.py"), "case": "MatMul 4096 x 4096 x 4096 bf16",
     "dims": {"M": 4096, "K": 4096, "N": 4096}, "quick_dims": {"M": 256, "K": 256, "N": 256},
     "dtypes": {"T": "bfloat16"}, "golden": False},
    {"op": str(EXAMPLES / "mat_mul.py"), "case": "MatMul 1000 x 1000 x 1000 fp16 (edges padded to 16)",
     "dims": {"M": 1000, "K": 1000, "N": 1000}, "quick_dims": {"M": 100, "K": 100, "N": 100},
     "dtypes": {"T": "float16"}},
    # two output blocks for 24 AI Cores: the tiling splits K (docs/design.md "Cube family: the K split")
    {"op": str(EXAMPLES / "mat_mul.py"), "case": "MatMul 256 x 16384 x 256 bf16 (K split)",
     "dims": {"M": 256, "K": 16384, "N": 256}, "quick_dims": {"M": 50, "K": 12347, "N": 70},
     "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "batch_mat_mul.py"), "case": "BatchMatMul 8 x 1024 x 1024 x 1024 bf16",
     "dims": {"B": 8, "M": 1024, "K": 1024, "N": 1024}, "quick_dims": {"B": 2, "M": 128, "K": 128, "N": 128},
     "dtypes": {"T": "bfloat16"}},
    {"op": str(EXAMPLES / "matmul_gelu.py"), "case": "MatmulGelu 4096 x 4096 x 4096 bf16 (epilogue on the AIV)",
     "dims": {"M": 4096, "K": 4096, "N": 4096}, "quick_dims": {"M": 256, "K": 256, "N": 256},
     "dtypes": {"T": "bfloat16"}, "golden": False},
    {"op": str(EXAMPLES / "flash_attention_score.py"),
     "case": "FlashAttentionScore B 1, N 32, S 4096, D 128 bf16, causal",
     "dims": {"B": 1, "N1": 32, "N2": 32, "S1": 4096, "S2": 4096, "D": 128, "MS1": 4096, "MS2": 4096},
     "quick_dims": {"B": 1, "N1": 2, "N2": 2, "S1": 256, "S2": 256, "D": 128, "MS1": 256, "MS2": 256},
     "attrs": {"sparse_mode": 2, "input_layout": "BNSD", "scale_value": 0.088}, "dtypes": {"T": "bfloat16"},
     "golden": False},
]

NSA_GM = [  # (label, dims) at the reference's defaults D 192 / Dv 128, bs 64, cnt 16 (L = 1024), 2 batches
    ("G=4, N2=2", {"T1": 48, "T2": 4096, "N1": 8, "N2": 2, "D": 192, "Dv": 128, "CNT": 16, "BS": 64, "Bn": 2}),
    ("G=16, N2=1", {"T1": 48, "T2": 4096, "N1": 16, "N2": 1, "D": 192, "Dv": 128, "CNT": 16, "BS": 64, "Bn": 2}),
]


NSA_RUNS = [("NsaSelectedAttention", {"input_layout": "TND"}, ("actual_seq_qlen", "actual_seq_kvlen")),
            ("NsaSelectedAttentionGrad", {}, ("actualSeqQLen", "actualSeqKVLlen"))]
"""(op, attrs, present inputs) of each NSA direction measured over NSA_GM's dims (fp16)."""


def gather_min_bytes(backward: bool, dims: dict, t_bytes: int = 2) -> int:
    """GM bytes a gather-based kernel cannot avoid without reuse across units: every (token, kv head) reads its
    L selected key and value rows once (L (D + Dv) e each), every other tensor is read or written once (forward:
    Q, O, the two [T1, N1, 8] stats, topk; backward: Q, O, dO, the stats, topk, dq, dk, dv). dims: T1, T2, N1, N2,
    D, Dv, CNT, BS (ints)."""
    T1, T2, N1, N2, D, Dv, CNT, BS = (int(dims[k]) for k in ("T1", "T2", "N1", "N2", "D", "Dv", "CNT", "BS"))
    e = t_bytes
    gather = T1 * N2 * CNT * BS * (D + Dv) * e
    stats, topk = 2 * T1 * N1 * 8 * 4, T1 * N2 * CNT * 4
    if not backward:
        return gather + T1 * N1 * (D + Dv) * e + stats + topk
    return gather + T1 * N1 * (2 * D + 2 * Dv) * e + stats + topk + T2 * N2 * (D + Dv) * e



CHECK = dict(  # `opgen check` vs `opgen interpret` as whole processes (opgen.bench.check): a 4096 x 4096 bf16 row norm
    spec="examples/specs/rms_norm.py", dims={"Bd": (4096,), "H": 4096}, quick_dims={"Bd": (256,), "H": 4096},
    dtypes={"T": "bfloat16"})


QUICK = dict(  # `opgen bench --quick`: which rows of the tables above a smoke run keeps (each at its quick size)
    # the NSA NumPy reference alone takes 6-12 s at any quick size the 16 x 64 selected keys allow
    interp=["AdaLayerNormGrad x[2,1024,1152] bf16", "NormRopeConcatGrad Flux B=1 S=4096+512 N=24 D=128 bf16"],
    emu_time=["AdaLayerNormGrad DiT [2, 1024, 1152] bf16"],
    gm=["H=1152, 4096 rows"],   # one emulation build, shared with emu_time (CHECK builds RmsNorm's)
    nsa_gm=[],   # the NSA kernels' builds alone exceed the smoke run's budget; their interpreter is in INTERP
    nsa_runs=[],
    generate=["specs/ada_layer_norm_v2.py"],   # `opgen generate` of one op (paths from the project root)
)
