"""Benchmark: device-mode interpretation vs a direct NumPy implementation of the same math.

Cases (README): DiT-sized AdaLayerNormGrad (x [2, 1024, 1152], bf16), Flux-sized NormRopeConcatGrad
(B=1, 4096 image + 512 text tokens, N=24, D=128, bf16, affine LayerNorm on both streams, half RoPE over
all 4608 positions, concat_order 1) and an NSA-shaped NsaSelectedAttentionGrad (GQA G=16, D=192/Dv=128,
16 blocks of 64 selected keys per token, 2 batches of 256 tokens, causal, bf16). Both sides run in this
process on the same inputs: fp32 compute, outputs rounded to bf16 (ties-to-even for AdaLayerNormGrad,
ties-away for the others; NSA also rounds P and dS, as the device does). The interpreter side is the
whole `interpret()` call (validation + conversion + evaluation).

Run: python bench/bench_interp.py [--repeat 5] [--json]  (or `opgen bench`)
Prints per case the median seconds of each side and the ratio interpreter / NumPy (goal <= 1.5).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import ml_dtypes
import numpy as np

from opgen.dsl.examples import random_inputs
from opgen.interp import interpret, round_to
from opgen.ir.dtypes import DType
from opgen.registry import load_spec

BF16 = ml_dtypes.bfloat16


def numpy_ada_grad(dy, x, rstd, mean, scale, gamma, beta):
    """AdaLayerNormGrad in fp32 NumPy (reference/ada_layer_norm.md §1.2), bf16 outputs (RNE)."""
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
    """NsaSelectedAttentionGrad in fp32 NumPy (reference/nsa_selected_attention.md §2: gather the selected
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

CASES = {
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


def _median_time(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


QUICK_DIMS = {  # smoke-run sizes (`--quick`)
    "AdaLayerNormGrad": {"Bd": (2,), "S": 64, "H": 1152},
    "NormRopeConcatGrad": {"B": 1, "Sq": 256, "Seq": 32, "Sk": 256, "Sek": 32, "N": 24, "D": 128, "R": 288},
    "NsaSelectedAttentionGrad": {**NSA_DIMS, "T1": 64, "T2": 2048, "Bn": 2},
}


def run(repeat: int = 5, quick: bool = False) -> list[dict]:
    """Measure every case; returns one dict per case (seconds are medians of `repeat` runs). quick: the
    QUICK_DIMS sizes (a smoke run)."""
    rows = []
    for name, c in CASES.items():
        spec = load_spec(c["op"])
        dims = QUICK_DIMS[c["op"]] if quick else c["dims"]
        inputs = random_inputs(spec, dims, c["attrs"], c["dtypes"], seed=0)
        ref = c["numpy"](inputs)
        got = interpret(spec, inputs, c["attrs"], c["dtypes"])
        worst = max(float(np.linalg.norm(got[k].astype(np.float64) - ref[k].astype(np.float64)) /
                          max(np.linalg.norm(ref[k].astype(np.float64)), 1e-30)) for k in ref)
        t_np = _median_time(lambda: c["numpy"](inputs), repeat)
        t_in = _median_time(lambda: interpret(spec, inputs, c["attrs"], c["dtypes"]), repeat)
        rows.append({"case": name, "numpy_s": t_np, "interpret_s": t_in, "ratio": t_in / t_np,
                     "rel_l2_vs_numpy": worst, "repeat": repeat})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = run(args.repeat)
    machine = f"{platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}"
    if args.json:
        print(json.dumps({"machine": machine, "results": rows}, indent=2))
        return 0
    print(f"interpreter (device mode) vs direct NumPy, median of {args.repeat} runs, {machine}")
    for r in rows:
        print(f"  {r['case']}: numpy {r['numpy_s']:.3f} s, interpret {r['interpret_s']:.3f} s, "
              f"ratio {r['ratio']:.2f} (goal <= 1.5); rel L2 vs NumPy {r['rel_l2_vs_numpy']:.2g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
