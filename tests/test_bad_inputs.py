"""Bad inputs: every item of the reference bad-input lists, mapped onto our six specs, must make
`interpret` raise one clean `ValidationError` whose `.param` is the spec's own OpDef input/attribute
name (or dtype variable) and whose rule carries a meaningful key phrase.

Method: each case starts from a named VALID input set (a "base"; `test_valid_base_passes` runs every
base once through `interpret` and checks the output shapes) and breaks exactly one thing: drops one
input, replaces one array, changes one attribute / dtype binding, or rebuilds the base with ONE dim
changed (a dim such as S=0 or D=7 is "one thing" even though several arrays carry it).

Dtype rule used for the "dtype X != dtype Y" items: float32 arrays are value containers (the
documented way to feed 16-bit runs), so they are converted to the declared dtype; but two arrays
of DIFFERENT 16-bit types bound to the same dtype variable (dy float16 with x bfloat16) contradict each
other and must be rejected, as CANN rejects them (161002). Inputs of a fixed dtype (mean/rstd fp32,
softmax stats fp32) are converted losslessly, so "stats dtype" items do not apply to the interpreter.

Mapping of the reference items (ids are the pytest ids; "n/a" = does not exist at the kernel-op
level that our specs model):

docs/reference/ada_layer_norm.md §2.3 suggested list -> AdaLayerNormGrad (kernel op: dy, x, rstd, mean, scale,
gamma, beta; mean/rstd fp32 [Bd..., S, 1])
| reference item                                   | case id(s) / why not applicable                     |
|--------------------------------------------------|-----------------------------------------------------|
| null gradOut / input / rstd / mean / scale       | alng-null-dy, -x, -rstd, -mean, -scale               |
| null normalizedShape                             | n/a: no normalizedShape at the kernel op (H from x)  |
| null shift                                       | n/a: shift is not a kernel input; passing it is      |
|                                                  | rejected: alng-unknown-input-shift                   |
| gradOut fp64 / uint64 (and int32)                | alng-dtype-T-float64, -T-uint64, -T-int32            |
| input dtype != gradOut                           | alng-dtype-x-bf16-vs-dy-f16                          |
| mean / rstd dtype != gradOut                     | n/a: kernel takes fp32 stats, arrays are converted   |
| scale / shift dtype != gradOut                   | alng-dtype-scale-bf16-vs-dy-f16 (shift n/a)          |
| weight fp16 with bf16 input                      | alng-dtype-gamma-f16-with-bf16, alng-dtypes-T-bf16-U-f16 |
| weight fp32 + bias fp16                          | alng-dtype-beta-f16-vs-gamma-bf16 (fp32 is a         |
|                                                  | container, so the mismatch is made with bf16/f16)    |
| gradInputOut uint64, gradScaleOut / gradWeightOut| n/a: outputs are produced by the interpreter, not    |
| dtype, any output shape                          | passed in                                            |
| input rank 1 / 9+                                | alng-shape-x-rank1, alng-shape-x-rank9               |
| gradOut shape != input                           | alng-shape-x-ne-dy                                   |
| normalizedShape [] / [7, 8] / [H+1]              | n/a (no such input); the weight-length gap of CANN   |
|                                                  | (§2.3 "Gaps") is checked: alng-shape-gamma-H+1,      |
|                                                  | alng-shape-beta-H-1                                  |
| mean [Bd..., S] / [B*S, 1]                       | alng-shape-mean-no-trailing-1, alng-shape-mean-BS-1  |
| rstd shape != mean shape                         | alng-shape-rstd-ne-mean                              |
| scale [Bd..., S, H] / [1, H] with B>1 /          | alng-shape-scale-BSH, alng-shape-scale-1H-B2,        |
| [2, 1, 6] for input [2, 6, 5, 6]                 | alng-shape-scale-216-for-2656                        |
| weight [1, 1, 1, 1, 1, H]                        | alng-shape-gamma-rank6                               |
| any zero dim (B=0, S=0, H=0)                     | alng-zero-B, alng-zero-S, alng-zero-H                |
| should-succeed: weight null, bias null, both     | bases ada_grad_no_gamma, _no_beta, _no_affine,       |
| null, fp16 input + fp32 weight, 2-D input with   | _f16_f32w, _2d_scaleH, _2d_scale1H, _8d              |
| scale [H] / [1, H], 8-D input                    | (test_valid_base_passes)                             |
| should-succeed: all outputs null; fp16 stats     | n/a (outputs not passed; stats are fp32 here)        |

docs/reference/ada_layer_norm.md §2.1 validation table + forward bad-input list -> AdaLayerNormV2
| step 1 null x / scale / shift (out: n/a)         | alnv2-null-x, -scale, -shift                         |
| step 2 x dtype not fp32/fp16/bf16 (x fp64)       | alnv2-dtype-T-float64                                |
| steps 3/4 scale / shift dtype != x               | alnv2-dtype-scale-f16-vs-x-bf16, -shift-f16-vs-x-bf16 |
| step 5 weight dtype != bias                      | alnv2-dtype-bias-f16-vs-weight-bf16                  |
| step 6/7 weight/bias dtype != x (fp32 weight with| alnv2-dtype-weight-f16-with-bf16; fp32 weight with   |
| fp16 x: V1 only, V2 allows it)                   | fp16 x is a valid V2 base: ada_v2_f16_f32w           |
| step 8 out dtype, step 15 out shape              | n/a (outputs)                                        |
| step 9 x rank 1 / 9                              | alnv2-shape-x-rank1, alnv2-shape-x-rank9             |
| step 10 zero dims (H = 0 UT)                     | alnv2-zero-H, alnv2-zero-S, alnv2-zero-B             |
| steps 11/12 scale, shift shape (scale [16, 128]  | alnv2-shape-scale-SH-for-BSH, alnv2-shape-shift-BSH  |
| for x [4, 16, 128] UT)                           |                                                      |
| steps 13/14 weight / bias shape (weight [512] for| alnv2-shape-weight-4H, alnv2-shape-bias-rank2        |
| H = 128 UT)                                      |                                                      |
| epsilon (not range-checked by CANN)              | type only: alnv2-attr-epsilon-str                    |

docs/reference/norm_rope_concat.md §3.3 forward table + "Recommended validation set" -> NormRopeConcat (nrc-*),
backward table -> NormRopeConcatGrad (nrcg-*)
| query/key/value null (fwd); gradQueryOutput,     | nrc-null-query/-key/-value; nrcg-null-grad_query_output, |
| gradKeyOutput, gradValueOutput, query, key null  | -grad_key_output, -grad_value_output, -query, -key   |
| gradQuery/gradKey/gradValue null; outputs        | n/a (outputs)                                        |
| dtype not in def (int32; UT case_2)              | nrc-dtype-T-int32, nrcg-dtype-T-int32                |
| present input dtype != query / gradQueryOutput   | nrc-dtype-norm_query_weight-bf16, nrc-dtype-rope_cos-bf16, |
| (weights, bias, sin, cos, key, encoders)         | nrcg-dtype-key-f16, -rope_sin-f16, -norm_added_key_weight-f16 |
| mean/rstd not fp32 (bwd)                         | n/a (converted); overflow of fp32: nrcg-overflow-rstd-fp32 |
| query or key not 4-D                             | nrc-shape-query-rank3, nrc-shape-key-rank5, nrcg-shape-query-rank3 |
| value/encoder*/key not 4-D or B/N/D mismatch     | nrc-shape-value-N, nrc-shape-encoder_query-rank3,    |
|                                                  | nrc-shape-encoder_key-B, nrc-shape-encoder_value-D,  |
|                                                  | nrcg-shape-key-N, -encoder_query-D, -encoder_key-B   |
| grad outputs not 4-D / dim0 != B / dim1 != N /   | nrcg-shape-grad_key_output-rank3, -grad_value_output-B, |
| dim3 != D                                        | -grad_key_output-N, -grad_value_output-D             |
| seq sums Sq+Seq == SQ, Sk+Sek == SK, SV (only    | nrcg-seqsum-grad_query_output, -grad_key_output,     |
| logged by CANN; "grad outputs exactly" recomm.)  | -grad_value_output                                   |
| D odd / D > 1024                                 | nrc-D-odd, nrc-D-1026, nrcg-D-odd, nrcg-D-1026       |
| weight/bias not [D]                              | nrc-shape-norm_key_weight-len, -norm_query_bias-rank2, |
|                                                  | -norm_added_key_bias-len, nrcg-shape-norm_key_weight-rank2, |
|                                                  | nrcg-shape-norm_query_weight-len                     |
| mean/rstd 4-D, B, N, 1 (dim1 unchecked by CANN)  | nrcg-shape-norm_query_mean-rank3, -norm_query_mean-S, |
|                                                  | -norm_key_rstd-last, -norm_added_query_mean-B        |
| ropeSin/Cos not 2-D, dim1 != D, rows differ      | nrc-shape-rope_sin-rank3, -rope_cos-D, -rope_cos-rows, |
|                                                  | nrcg-shape-rope_cos-rank3, -rope_sin-D, -rope_cos-rows |
| rope rows outside 1..min(SQ, SK) (CANN: max)     | nrc-rope-R-0, nrc-rope-R-gt-SK, nrc-rope-R-gt-SQ, nrcg-... |
| Sk != Sv, Sek != Sev                             | nrc-shape-value-Sv, nrc-shape-encoder_value-Sev      |
| encoder_key null <=> encoder_value null          | nrc-encoder_value-without-key, nrc-encoder_key-without-value |
| types outside {0,1,2}, order outside {0,1}       | nrc-attr-norm_type-3, -norm_added_type-9, -rope_type-3, |
| (bwd: 3..9 pass CANN's tiling, no kernel)        | -rope_type-neg1, -concat_order-2; nrcg-attr-...      |
| weights present when type 2                      | nrc-missing-norm_query_weight, -norm_key_bias,       |
|                                                  | -norm_added_query_weight; nrcg-missing-norm_query_weight, |
|                                                  | -norm_added_key_weight                               |
| mean/rstd present when type >= 1 (bwd)           | nrcg-missing-norm_key_mean, -norm_added_query_rstd   |
| sin/cos present (effectively required)           | nrc-missing-rope_sin, -rope_cos, nrcg-missing-rope_cos |
| eps sign / isTraining outputs / output shapes    | n/a (no rule in the recommended set; outputs)        |

docs/reference/nsa_selected_attention.md §3 -> NsaSelectedAttention (nsa-*), NsaSelectedAttentionGrad (nsag-*)
| A1 null query/key/value/topk/seq arrays/layout   | nsa-A1-null-*, nsa-A1-missing-input_layout           |
| A1 null outputs/executor/workspace, A2, A3, A11  | n/a (outputs / runtime objects)                      |
| A4 layout != "TND" (case-sensitive)              | nsa-A4-layout-BSND, nsa-A4-layout-tnd                |
| A5 query rank != 3                               | nsa-A5-query-rank4                                   |
| A6 query.D != key.D                              | nsa-A6-key-D                                         |
| A7 query.D < value.D                             | nsa-A7-Dv-gt-D                                       |
| A8 / T16 D > 768                                 | nsa-A8-D-784                                         |
| A9 / T13 seq array length > 3072 / B > 1024      | nsa-A9-T13-Bn-1025                                   |
| A10 / T15 / T16 key.shape[1] == 0, D == 0, G == 0| nsa-A10-N2-0, nsa-A10-D-0, nsa-T15-G-0               |
| T1 layout (infershape)                           | same as A4                                           |
| T2 D mismatch                                    | same as A6                                           |
| T3 empty query/key                               | nsa-A10-*, nsag-B3-T1-0                              |
| T4 / T5 block size > 128 / % 16                  | nsa-T4-bs-144, nsa-T5-bs-24                          |
| T6 block count > 32                              | nsa-T6-CNT-33                                        |
| T7 headNum == 0                                  | nsa-T7-head_num-0                                    |
| T8 sparseMode not in {0, 2} (also without mask)  | nsa-T8-sparse_mode-1, nsa-T8-sparse_mode-3-nomask    |
| T9 query dtype not fp16/bf16                     | nsa-T9-dtype-T-float32                               |
| T10 topk.shape[2] != selectedBlockCount          | nsa-T10-count-ne-topk                                |
| T11 rank of query/key/topk != 3                  | nsa-T11-key-rank2, nsa-T11-topk-rank2                |
| T12 seq array lengths differ                     | nsa-T12-kvlen-len3                                   |
| T14 T < sum of lengths (+ stricter: T > sum)     | nsa-T14-qlen-end-gt-T1, -kvlen-end-gt-T2,            |
|                                                  | nsa-cu-qlen-end-lt-T1, nsa-cu-kvlen-end-lt-T2        |
| T17 headNum % N2 (+ stricter headNum == N1,      | nsa-T17-head_num-3, nsa-N1-not-multiple-of-N2        |
| N1 % N2 == 0)                                    |                                                      |
| T18 mask dtype not bool/uint8                    | nsa-T18-mask-float16, nsa-T18-dtype-M-float16        |
| T19 mask rank != 2                               | nsa-T19-mask-rank3                                   |
| T20 matmul tiling                                | n/a (device tiling)                                  |
| B1 null inputs (outputs: n/a)                    | nsag-B1-null-*                                       |
| B2, B4, B6 runtime failures                      | n/a (B6 = the G* rows)                               |
| B3 query empty (CANN: silent success)            | nsag-B3-T1-0 (we reject)                             |
| B5 / G5 layout != "TND"                          | nsag-B5-layout-BSND, nsag-G5-layout-tnd              |
| G1 sparseMode                                    | nsag-G1-sparseMode-1                                 |
| G2 / G3 D mismatch, Dv > D                       | nsag-G2-key-D, nsag-G3-Dv-gt-D                       |
| G4 headNum == 0                                  | nsag-G4-headNum-0                                    |
| G6 query rank                                    | nsag-G6-query-rank2                                  |
| G7 / G9 seq arrays missing                       | nsag-G7-null-actualSeqQLen, -actualSeqKVLlen         |
| G8 lengths differ                                | nsag-G8-kvlen-len3                                   |
| G10 N2 == 0, G == 0                              | nsag-G10-N2-0, nsag-G10-G-0                          |
| G11 softmax dtype not fp32                       | n/a (fixed fp32, converted); nsag-overflow-softmaxSum-fp32 |
| G12 attentionOut dtype != query                  | nsag-G12-attentionOut-bf16                           |
| G13 T1 / headNum / D / Dv == 0                   | nsag-B3-T1-0, nsag-G4-headNum-0, nsag-G13-D-0, nsag-G13-Dv-0 |
| G14 softmax rank / shape != [T1, headNum, 8]     | nsag-G14-softmaxMax-last, -softmaxSum-rank2, -softmaxMax-N1 |
| G15 / G16 attentionOut rank / dims               | nsag-G15-attentionOut-rank4, nsag-G16-attentionOut-T1, -Dv |
| H1 per-batch length <= 0                         | nsag-H1-qlen-first-0, nsag-H1-kvlen-empty-batch      |
| H2 selectedBlockCount not in [1, 32] (opgen: [1, 128]) | nsag-H2-CNT-129, nsag-H2-CNT-0 |
| H3 selectedBlockSize not in [16, 128] or % 16    | nsag-H3-bs-8, nsag-H3-bs-144, nsag-H3-bs-24          |
| stricter (brief): topk negative / out of range,  | nsa(g)-topk-negative, -topk-past-batch, -topk-huge,  |
| non-increasing seq arrays, headNum != N1, end !=  | nsa(g)-cu-*-non-increasing, nsa-T17-*, nsag-headNum-2, |
| T1/T2, fully masked rows in sparse mode 2, dO /   | nsa(g)-cu-*-end-*, nsa(g)-fully-masked-row,          |
| topk dims                                        | nsag-shape-attentionOutGrad-Dv, nsa(g)-shape-topk-*  |

Generic items: unknown input (alng-unknown-input-shift, nrcg-unknown-input-value, nrc-unknown-input-
encoderQuery, nsag-unknown-input-atten_mask), unknown attribute (alng-unknown-attr-epsilon,
nrcg-unknown-attr-eps, nrc-unknown-attr-normType, nsa-unknown-attr-scaleValue, nsag-unknown-attr-
scale_value), wrong attribute type (*-attr-*-str / -float / -bool), value outside choices (above),
dtype combination (alng-dtypes-T-bf16-U-f16), required input None (all *-null-*), fp16 overflow
(*-overflow-*), fractional int32 topk (nsa-topk-fractional, nsag-topk-fractional), int32 range
(nsa-topk-int32-range), fractional int64 seq array (nsa-cu-qlen-fractional).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import ml_dtypes
import numpy as np
import pytest

from opgen.errors import ValidationError
from opgen.interp import interpret
from opgen.registry import load_spec

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)


def _arr(rng, shape, dt):
    """N(0, 1) values of `shape`, rounded to numpy dtype `dt`."""
    return rng.standard_normal(shape).astype(np.float32).astype(dt)


def _pos(rng, shape):
    """Positive fp32 values (rstd, softmax sums)."""
    return (np.abs(rng.standard_normal(shape)) + 0.5).astype(np.float32)


# =====================================================================================
# Valid input builders: (op, inputs, attrs, dtypes); dtypes are inferred from typed arrays
# =====================================================================================

def ada_grad(Bd=(2,), S=3, H=8, T=F32, U=F32, gamma=True, beta=True, scale_form=0, seed=0):
    """AdaLayerNormGrad kernel-op inputs (docs/reference/ada_layer_norm.md §1.2, §1.4, §1.5)."""
    r = np.random.default_rng(seed)
    Bd = tuple(Bd)
    scale_shape = (*Bd, H) if scale_form == 0 else (*Bd, 1, H)
    inputs = {
        "dy": _arr(r, (*Bd, S, H), T),
        "x": _arr(r, (*Bd, S, H), T),
        "rstd": _pos(r, (*Bd, S, 1)),
        "mean": _arr(r, (*Bd, S, 1), F32),
        "scale": _arr(r, scale_shape, T),
        "gamma": _arr(r, (H,), U) if gamma else None,
        "beta": _arr(r, (H,), U) if beta else None,
    }
    return "AdaLayerNormGrad", inputs, {}, None


def ada_v2(Bd=(2,), S=3, H=8, T=F32, U=F32, seed=1):
    """AdaLayerNormV2 inputs; scale and shift in different forms, as CANN's ST cases mix them (§1.5)."""
    r = np.random.default_rng(seed)
    Bd = tuple(Bd)
    inputs = {
        "x": _arr(r, (*Bd, S, H), T),
        "scale": _arr(r, (*Bd, H), T),
        "shift": _arr(r, (*Bd, 1, H), T),
        "weight": _arr(r, (H,), U),
        "bias": _arr(r, (H,), U),
    }
    return "AdaLayerNormV2", inputs, {"epsilon": 1e-5}, None


def nrc(B=1, Sq=4, Sk=3, N=2, D=8, Seq=2, Sek=2, R=2, T=F32, seed=2):
    """NormRopeConcat with every optional input present: both norm types 2, interleave RoPE,
    training. SQ = 6 > SK = 5, so the two R bounds can be broken separately."""
    r = np.random.default_rng(seed)
    inputs = {
        "query": _arr(r, (B, Sq, N, D), T),
        "key": _arr(r, (B, Sk, N, D), T),
        "value": _arr(r, (B, Sk, N, D), T),
        "encoder_query": _arr(r, (B, Seq, N, D), T),
        "encoder_key": _arr(r, (B, Sek, N, D), T),
        "encoder_value": _arr(r, (B, Sek, N, D), T),
    }
    for p in ("norm_query", "norm_key", "norm_added_query", "norm_added_key"):
        inputs[f"{p}_weight"] = _arr(r, (D,), T)
        inputs[f"{p}_bias"] = _arr(r, (D,), T)
    inputs["rope_sin"] = _arr(r, (R, D), T)
    inputs["rope_cos"] = _arr(r, (R, D), T)
    attrs = {"norm_type": 2, "norm_added_type": 2, "rope_type": 1, "concat_order": 0, "eps": 1e-5,
             "is_training": True}
    return "NormRopeConcat", inputs, attrs, None


def nrc_grad(B=1, Sq=4, Sk=3, N=2, D=8, Seq=2, Sek=2, R=2, T=F32, seed=3):
    """NormRopeConcatGrad with every optional input present: both norm types 2, half RoPE,
    concat order 1 (docs/reference/norm_rope_concat.md §3.2 table)."""
    r = np.random.default_rng(seed)
    inputs = {
        "grad_query_output": _arr(r, (B, N, Sq + Seq, D), T),
        "grad_key_output": _arr(r, (B, N, Sk + Sek, D), T),
        "grad_value_output": _arr(r, (B, N, Sk + Sek, D), T),
        "query": _arr(r, (B, Sq, N, D), T),
        "key": _arr(r, (B, Sk, N, D), T),
        "encoder_query": _arr(r, (B, Seq, N, D), T),
        "encoder_key": _arr(r, (B, Sek, N, D), T),
    }
    for p, s in (("norm_query", Sq), ("norm_key", Sk), ("norm_added_query", Seq), ("norm_added_key", Sek)):
        inputs[f"{p}_weight"] = _arr(r, (D,), T)
        inputs[f"{p}_mean"] = _arr(r, (B, s, N, 1), F32)
        inputs[f"{p}_rstd"] = _pos(r, (B, s, N, 1))
    inputs["rope_sin"] = _arr(r, (R, D), T)
    inputs["rope_cos"] = _arr(r, (R, D), T)
    attrs = {"norm_type": 2, "norm_added_type": 2, "rope_type": 2, "concat_order": 1}
    return "NormRopeConcatGrad", inputs, attrs, None


def _nsa_layout(T1, T2, Bn, N2, CNT, BS):
    """Cumulative ends splitting T1/T2 into Bn nearly equal batches, and topk[t, n, i] = i mod
    (blocks in t's batch): block 0 first, so every row sees key 0 under causal masking."""
    cu_q = np.array([(T1 * (i + 1)) // Bn for i in range(Bn)], np.int64)
    cu_kv = np.array([(T2 * (i + 1)) // Bn for i in range(Bn)], np.int64)
    s2 = np.diff(np.concatenate([[0], cu_kv]))
    batch = np.searchsorted(cu_q, np.arange(T1), side="right")
    nblocks = np.maximum(s2[np.minimum(batch, Bn - 1)] // max(BS, 1), 1) if T1 else np.zeros(0, np.int64)
    topk = (np.arange(CNT)[None, None, :] % nblocks[:, None, None]) * np.ones((1, N2, 1), np.int64)
    return cu_q, cu_kv, topk.astype(np.int32)


def nsa(T1=4, T2=64, Bn=2, N1=4, N2=2, D=32, Dv=16, BS=16, CNT=2, T=F16, mask=True, sparse_mode=2,
        future_row=False, seed=4):
    """NsaSelectedAttention (TND, GQA G=2); batches of 2 tokens / 32 keys = 2 blocks of 16.
    future_row: token 0 selects only block 1 (legal unless causal masking is on)."""
    r = np.random.default_rng(seed)
    cu_q, cu_kv, topk = _nsa_layout(T1, T2, Bn, N2, CNT, BS)
    if future_row:
        topk[0, 0, :] = 1
    inputs = {
        "query": _arr(r, (T1, N1, D), T),
        "key": _arr(r, (T2, N2, D), T),
        "value": _arr(r, (T2, N2, Dv), T),
        "topk_indices": topk,
        "atten_mask": np.ones((8, 8), np.bool_) if mask else None,
        "actual_seq_qlen": cu_q,
        "actual_seq_kvlen": cu_kv,
    }
    attrs = {"scale_value": 0.5, "head_num": N1, "sparse_mode": sparse_mode, "input_layout": "TND",
             "selected_block_size": BS, "selected_block_count": CNT}
    return "NsaSelectedAttention", inputs, attrs, None


def nsa_grad(T1=4, T2=64, Bn=2, N1=4, N2=2, D=32, Dv=16, BS=16, CNT=2, T=F16, sparse_mode=2, seed=5):
    """NsaSelectedAttentionGrad (TND); stats are arbitrary valid fp32 values (validation only needs
    their dtype/shape; the base run only checks output shapes)."""
    r = np.random.default_rng(seed)
    cu_q, cu_kv, topk = _nsa_layout(T1, T2, Bn, N2, CNT, BS)
    inputs = {
        "query": _arr(r, (T1, N1, D), T),
        "key": _arr(r, (T2, N2, D), T),
        "value": _arr(r, (T2, N2, Dv), T),
        "attentionOut": _arr(r, (T1, N1, Dv), T),
        "attentionOutGrad": _arr(r, (T1, N1, Dv), T),
        "softmaxMax": _arr(r, (T1, N1, 8), F32),
        "softmaxSum": _pos(r, (T1, N1, 8)) + 1.0,
        "topkIndices": topk,
        "actualSeqQLen": cu_q,
        "actualSeqKVLlen": cu_kv,
        "attenMsk": None,
    }
    attrs = {"scaleValue": 0.5, "selectedBlockCount": CNT, "selectedBlockSize": BS, "headNum": N1,
             "inputLayout": "TND", "sparseMode": sparse_mode}
    return "NsaSelectedAttentionGrad", inputs, attrs, None


#: name -> (builder, kwargs). Every base must pass `interpret` (test_valid_base_passes).
BASES: dict[str, tuple[Callable, dict]] = {
    "ada_grad": (ada_grad, {}),
    "ada_grad_f16": (ada_grad, {"T": F16, "U": F16}),
    "ada_grad_bf16": (ada_grad, {"T": BF16, "U": BF16}),
    "ada_grad_4d": (ada_grad, {"Bd": (2, 6), "S": 5, "H": 6}),
    # should-succeed list of docs/reference/ada_layer_norm.md §2.3
    "ada_grad_no_gamma": (ada_grad, {"gamma": False}),
    "ada_grad_no_beta": (ada_grad, {"beta": False}),
    "ada_grad_no_affine": (ada_grad, {"gamma": False, "beta": False}),
    "ada_grad_f16_f32w": (ada_grad, {"T": F16, "U": F32}),
    "ada_grad_2d_scaleH": (ada_grad, {"Bd": ()}),
    "ada_grad_2d_scale1H": (ada_grad, {"Bd": (), "scale_form": 1}),
    "ada_grad_8d": (ada_grad, {"Bd": (2, 1, 1, 2, 1, 1)}),
    "ada_v2": (ada_v2, {}),
    "ada_v2_bf16": (ada_v2, {"T": BF16, "U": BF16}),
    "ada_v2_f16_f32w": (ada_v2, {"T": F16, "U": F32}),   # V1 forbids, V2 allows (§6.3)
    "nrc": (nrc, {}),
    "nrc_f16": (nrc, {"T": F16}),
    "nrc_grad": (nrc_grad, {}),
    "nrc_grad_bf16": (nrc_grad, {"T": BF16}),
    "nsa": (nsa, {}),
    "nsa_nomask": (nsa, {"mask": False}),
    # without a mask tensor the forward does not mask (§2.3): a row of future blocks is legal
    "nsa_nomask_future_row": (nsa, {"mask": False, "future_row": True}),
    "nsa_sparse0_future_row": (nsa, {"sparse_mode": 0, "future_row": True}),
    "nsa_grad": (nsa_grad, {}),
    "nsa_grad_sparse0": (nsa_grad, {"sparse_mode": 0}),
}


def build(base, **overrides):
    """The base's valid set, rebuilt with dim/flag overrides (fresh arrays, independent copies)."""
    fn, kw = BASES[base]
    return fn(**{**kw, **overrides})


# =====================================================================================
# Mutations: each breaks exactly one thing of a base
# =====================================================================================

@dataclass
class Ctx:
    """A case under construction."""

    base: str
    op: str
    inputs: dict
    attrs: dict
    dtypes: dict | None


def drop(name):
    """Absent input (None)."""
    def f(c):
        c.inputs[name] = None
    return f


def put(name, fn):
    """Replace input `name` by fn(old array) (also used to add an unknown input)."""
    def f(c):
        c.inputs[name] = fn(c.inputs.get(name))
    return f


def reshape(name, shape):
    """Replace input `name` by an array of the same dtype with another shape."""
    def f(c):
        old = c.inputs[name]
        r = np.random.default_rng(99)
        c.inputs[name] = (r.standard_normal(shape).astype(np.float32).astype(old.dtype) if old.dtype.kind == "f"
                          or old.dtype == BF16 else np.zeros(shape, old.dtype))
    return f


def cast(name, dt):
    """Give input `name` as another numpy dtype."""
    return put(name, lambda a: a.astype(dt))


def attr(**kv):
    """Set attributes."""
    def f(c):
        c.attrs.update(kv)
    return f


def unattr(name):
    """Remove an attribute (so its default applies / it is missing)."""
    def f(c):
        c.attrs.pop(name)
    return f


def dtypes(**kv):
    """Bind dtype variables explicitly."""
    def f(c):
        c.dtypes = dict(kv)
    return f


def dims(**kv):
    """Rebuild the base with one dim changed (every array that carries it follows)."""
    def f(c):
        _, c.inputs, c.attrs, c.dtypes = build(c.base, **kv)
    return f


def edit(name, fn):
    """In-place edit of a copy of input `name`: fn(copy) modifies it."""
    def f(c):
        a = c.inputs[name].copy()
        fn(a)
        c.inputs[name] = a
    return f


class Any:
    """Phrase alternatives: the rule must contain at least one."""

    def __init__(self, *alts):
        self.alts = alts

    def __repr__(self):
        return " | ".join(map(repr, self.alts))


@dataclass
class Case:
    """A bad-input case: base name, the one mutation, expected param(s), key phrase(s) of the rule."""

    id: str
    base: str
    mutate: Callable
    param: str | tuple
    phrase: object  # str, Any, or tuple of those (all must hold)


def _set(idx, v):
    def f(a):
        a[idx] = v
    return f


def _overflow16(a):
    """float32 copy of `a` with one value (7e4 / 1e5) that fp16 cannot hold (max 65504)."""
    out = np.asarray(a, np.float32).copy()
    out.flat[0] = 7.0e4
    return out


def overflow16(name):
    """Input `name` as float32 data holding a value fp16 cannot hold, with T bound to float16 explicitly (as
    --dtype T=float16 does): float32 arrays are converted only for an explicit binding; otherwise float32 beside
    float16 is a dtype combination outside the table (alng-dtype-* cases)."""
    def f(c):
        c.inputs[name] = _overflow16(c.inputs.get(name))
        c.dtypes = {**(c.dtypes or {}), "T": "float16"}
    return f


CASES: list[Case] = []


def case(id_, base, mutate, param, phrase):
    CASES.append(Case(id_, base, mutate, param, phrase))


# ---- AdaLayerNormGrad (docs/reference/ada_layer_norm.md §2.3 suggested list) ---------------------------------------
for _n in ("dy", "x", "rstd", "mean", "scale"):
    case(f"alng-null-{_n}", "ada_grad", drop(_n), _n, "required")
case("alng-unknown-input-shift", "ada_grad", put("shift", lambda _: np.zeros((2, 8), np.float32)), "shift",
     "unknown input")
case("alng-unknown-attr-epsilon", "ada_grad", attr(epsilon=1e-5), "epsilon", "unknown attribute")
case("alng-dtype-T-float64", "ada_grad", dtypes(T="float64", U="float32"), ("T", "dy"), "float64")
case("alng-dtype-T-uint64", "ada_grad", dtypes(T="uint64", U="float32"), ("T", "dy"), "uint64")
case("alng-dtype-T-int32", "ada_grad", dtypes(T="int32", U="float32"), ("T", "dy"), "not supported")
case("alng-dtype-x-bf16-vs-dy-f16", "ada_grad_f16", cast("x", BF16), "x", "bfloat16")
case("alng-dtype-scale-bf16-vs-dy-f16", "ada_grad_f16", cast("scale", BF16), "scale", "bfloat16")
case("alng-dtype-gamma-f16-with-bf16", "ada_grad_bf16", cast("gamma", F16), "gamma", "float16")
case("alng-dtype-beta-f16-vs-gamma-bf16", "ada_grad_bf16", cast("beta", F16), "beta", "float16")
case("alng-dtypes-T-bf16-U-f16", "ada_grad", dtypes(T="bfloat16", U="float16"), ("U", "gamma"),
     ("not supported", "float16"))
case("alng-overflow-x-fp16", "ada_grad_f16", overflow16("x"), "x", "overflow")
case("alng-shape-x-rank1", "ada_grad", reshape("x", (8,)), "x", "rank")
case("alng-shape-x-rank9", "ada_grad", reshape("x", (2, 1, 1, 1, 1, 1, 1, 3, 8)), "x", "rank")
case("alng-shape-x-ne-dy", "ada_grad", reshape("x", (2, 4, 8)), "x", "S=3")
case("alng-shape-mean-no-trailing-1", "ada_grad", reshape("mean", (2, 3)), "mean", "[2, 3]")
case("alng-shape-mean-BS-1", "ada_grad", reshape("mean", (6, 1)), "mean", "[6, 1]")
case("alng-shape-rstd-ne-mean", "ada_grad", reshape("rstd", (2, 2, 1)), "rstd", "S=3")
case("alng-shape-scale-BSH", "ada_grad", reshape("scale", (2, 3, 8)), "scale", "[2, 3, 8]")
case("alng-shape-scale-1H-B2", "ada_grad", reshape("scale", (1, 8)), "scale", "[1, 8]")
case("alng-shape-scale-216-for-2656", "ada_grad_4d", reshape("scale", (2, 1, 6)), "scale", "[2, 1, 6]")
case("alng-shape-gamma-rank6", "ada_grad", reshape("gamma", (1, 1, 1, 1, 1, 8)), "gamma", "rank")
case("alng-shape-gamma-H+1", "ada_grad", reshape("gamma", (9,)), "gamma", "H=8")
case("alng-shape-beta-H-1", "ada_grad", reshape("beta", (7,)), "beta", "H=8")
case("alng-zero-B", "ada_grad", dims(Bd=(0,)), "dy", Any(">= 1", "empty", "zero", "must be positive"))
case("alng-zero-S", "ada_grad", dims(S=0), "dy", ("S=0", ">= 1"))
case("alng-zero-H", "ada_grad", dims(H=0), "dy", ("H=0", ">= 1"))

# ---- AdaLayerNormV2 (docs/reference/ada_layer_norm.md §2.1 table, forward bad-input list, §2.2) ---------------------
for _n in ("x", "scale", "shift"):
    case(f"alnv2-null-{_n}", "ada_v2", drop(_n), _n, "required")
case("alnv2-dtype-T-float64", "ada_v2", dtypes(T="float64", U="float32"), ("T", "x"), "float64")
case("alnv2-dtype-scale-f16-vs-x-bf16", "ada_v2_bf16", cast("scale", F16), "scale", "float16")
case("alnv2-dtype-shift-f16-vs-x-bf16", "ada_v2_bf16", cast("shift", F16), "shift", "float16")
case("alnv2-dtype-bias-f16-vs-weight-bf16", "ada_v2_bf16", cast("bias", F16), "bias", "float16")
case("alnv2-dtype-weight-f16-with-bf16", "ada_v2_bf16", cast("weight", F16), "weight", "float16")
case("alnv2-shape-x-rank1", "ada_v2", reshape("x", (8,)), "x", "rank")
case("alnv2-shape-x-rank9", "ada_v2", reshape("x", (2, 1, 1, 1, 1, 1, 1, 3, 8)), "x", "rank")
case("alnv2-zero-H", "ada_v2", dims(H=0), "x", ("H=0", ">= 1"))
case("alnv2-zero-S", "ada_v2", dims(S=0), "x", ("S=0", ">= 1"))
case("alnv2-zero-B", "ada_v2", dims(Bd=(0,)), "x", Any(">= 1", "empty", "zero", "must be positive"))
case("alnv2-shape-scale-SH-for-BSH", "ada_v2", reshape("scale", (3, 8)), "scale", "[3, 8]")
case("alnv2-shape-shift-BSH", "ada_v2", reshape("shift", (2, 3, 8)), "shift", "[2, 3, 8]")
case("alnv2-shape-weight-4H", "ada_v2", reshape("weight", (32,)), "weight", "H=8")
case("alnv2-shape-bias-rank2", "ada_v2", reshape("bias", (1, 8)), "bias", "rank")
case("alnv2-attr-epsilon-str", "ada_v2", attr(epsilon="small"), "epsilon", "type float")
case("alnv2-overflow-scale-fp16", "ada_v2_f16_f32w", overflow16("scale"), "scale", "overflow")

# ---- NormRopeConcat (docs/reference/norm_rope_concat.md §3.3 forward table + recommended validation set) -----------
for _n in ("query", "key", "value"):
    case(f"nrc-null-{_n}", "nrc", drop(_n), _n, "required")
case("nrc-dtype-T-int32", "nrc", dtypes(T="int32"), ("T", "query"), "not supported")
case("nrc-dtype-norm_query_weight-bf16", "nrc_f16", cast("norm_query_weight", BF16), "norm_query_weight", "bfloat16")
case("nrc-dtype-rope_cos-bf16", "nrc_f16", cast("rope_cos", BF16), "rope_cos", "bfloat16")
case("nrc-shape-query-rank3", "nrc", reshape("query", (1, 4, 16)), "query", "rank")
case("nrc-shape-key-rank5", "nrc", reshape("key", (1, 3, 2, 8, 1)), "key", "rank")
case("nrc-shape-value-N", "nrc", reshape("value", (1, 3, 3, 8)), "value", "N=2")
case("nrc-shape-value-Sv", "nrc", reshape("value", (1, 4, 2, 8)), "value", "Sk=3")
case("nrc-shape-encoder_query-rank3", "nrc", reshape("encoder_query", (1, 2, 16)), "encoder_query", "rank")
case("nrc-shape-encoder_key-B", "nrc", reshape("encoder_key", (2, 2, 2, 8)), "encoder_key", "B=1")
case("nrc-shape-encoder_value-D", "nrc", reshape("encoder_value", (1, 2, 2, 6)), "encoder_value", "D=8")
case("nrc-shape-encoder_value-Sev", "nrc", reshape("encoder_value", (1, 3, 2, 8)), "encoder_value", "Sek=2")
case("nrc-shape-norm_key_weight-len", "nrc", reshape("norm_key_weight", (6,)), "norm_key_weight", "D=8")
case("nrc-shape-norm_query_bias-rank2", "nrc", reshape("norm_query_bias", (8, 1)), "norm_query_bias", "rank")
case("nrc-shape-norm_added_key_bias-len", "nrc", reshape("norm_added_key_bias", (10,)), "norm_added_key_bias",
     "D=8")
case("nrc-shape-rope_sin-rank3", "nrc", reshape("rope_sin", (2, 8, 1)), "rope_sin", "rank")
case("nrc-shape-rope_cos-D", "nrc", reshape("rope_cos", (2, 6)), "rope_cos", "D=8")
case("nrc-shape-rope_cos-rows", "nrc", reshape("rope_cos", (3, 8)), "rope_cos", "R=2")
case("nrc-D-odd", "nrc", dims(D=7), "query", ("D=7", "multiple of 2"))
case("nrc-D-1026", "nrc", dims(D=1026), "query", ("D=1026", "<= 1024"))
case("nrc-rope-R-0", "nrc", dims(R=0), "rope_sin", ("R=0", ">= 1"))
case("nrc-rope-R-gt-SK", "nrc", dims(R=6), "rope_sin", ("exceed", "key"))
case("nrc-rope-R-gt-SQ", "nrc", dims(R=7), "rope_sin", "exceed")
case("nrc-encoder_value-without-key", "nrc", drop("encoder_key"), ("encoder_value", "encoder_key"), "encoder_key")
case("nrc-encoder_key-without-value", "nrc", drop("encoder_value"), ("encoder_value", "encoder_key"), "encoder_key")
case("nrc-attr-norm_type-3", "nrc", attr(norm_type=3), "norm_type", "must be one of")
case("nrc-attr-norm_added_type-9", "nrc", attr(norm_added_type=9), "norm_added_type", "must be one of")
case("nrc-attr-rope_type-3", "nrc", attr(rope_type=3), "rope_type", "must be one of")
case("nrc-attr-rope_type-neg1", "nrc", attr(rope_type=-1), "rope_type", "must be one of")
case("nrc-attr-concat_order-2", "nrc", attr(concat_order=2), "concat_order", "must be one of")
case("nrc-attr-norm_type-str", "nrc", attr(norm_type="two"), "norm_type", "type int")
case("nrc-attr-rope_type-float", "nrc", attr(rope_type=1.5), "rope_type", "type int")
case("nrc-attr-is_training-2", "nrc", attr(is_training=2), "is_training", "type bool")
case("nrc-attr-eps-str", "nrc", attr(eps="tiny"), "eps", "type float")
case("nrc-unknown-attr-normType", "nrc", attr(normType=2), "normType", "unknown attribute")
case("nrc-unknown-input-encoderQuery", "nrc", put("encoderQuery", lambda _: np.zeros((1, 2, 2, 8), np.float32)),
     "encoderQuery", "unknown input")
for _n in ("norm_query_weight", "norm_key_bias", "norm_added_query_weight"):
    case(f"nrc-missing-{_n}", "nrc", drop(_n), _n, ("required", "== 2"))
for _n in ("rope_sin", "rope_cos"):
    case(f"nrc-missing-{_n}", "nrc", drop(_n), _n, "required")
case("nrc-overflow-key-fp16", "nrc_f16", overflow16("key"), "key", "overflow")

# ---- NormRopeConcatGrad (docs/reference/norm_rope_concat.md §3.3 backward tables) ----------------------------------
for _n in ("grad_query_output", "grad_key_output", "grad_value_output", "query", "key"):
    case(f"nrcg-null-{_n}", "nrc_grad", drop(_n), _n, "required")
case("nrcg-dtype-T-int32", "nrc_grad", dtypes(T="int32"), ("T", "grad_query_output"), "not supported")
case("nrcg-dtype-key-f16", "nrc_grad_bf16", cast("key", F16), "key", "float16")
case("nrcg-dtype-rope_sin-f16", "nrc_grad_bf16", cast("rope_sin", F16), "rope_sin", "float16")
case("nrcg-dtype-norm_added_key_weight-f16", "nrc_grad_bf16", cast("norm_added_key_weight", F16),
     "norm_added_key_weight", "float16")
case("nrcg-overflow-rstd-fp32", "nrc_grad", put("norm_query_rstd", lambda a: np.full(a.shape, 1e39)),
     "norm_query_rstd", ("overflow", "float32"))
case("nrcg-shape-query-rank3", "nrc_grad", reshape("query", (1, 4, 16)), "query", "rank")
case("nrcg-shape-grad_key_output-rank3", "nrc_grad", reshape("grad_key_output", (1, 2, 40)), "grad_key_output",
     "rank")
case("nrcg-shape-grad_value_output-B", "nrc_grad", reshape("grad_value_output", (2, 2, 5, 8)), "grad_value_output",
     "B=1")
case("nrcg-shape-grad_key_output-N", "nrc_grad", reshape("grad_key_output", (1, 3, 5, 8)), "grad_key_output", "N=2")
case("nrcg-shape-grad_value_output-D", "nrc_grad", reshape("grad_value_output", (1, 2, 5, 6)), "grad_value_output",
     "D=8")
case("nrcg-seqsum-grad_query_output", "nrc_grad", reshape("grad_query_output", (1, 2, 7, 8)), "grad_query_output",
     Any("Sq + Seq", "Seq + Sq"))
case("nrcg-seqsum-grad_key_output", "nrc_grad", reshape("grad_key_output", (1, 2, 6, 8)), "grad_key_output",
     Any("Sk + Sek", "Sek + Sk"))
case("nrcg-seqsum-grad_value_output", "nrc_grad", reshape("grad_value_output", (1, 2, 4, 8)), "grad_value_output",
     Any("Sk + Sek", "Sek + Sk"))
case("nrcg-shape-key-N", "nrc_grad", reshape("key", (1, 3, 3, 8)), "key", "N=2")
case("nrcg-shape-encoder_query-D", "nrc_grad", reshape("encoder_query", (1, 2, 2, 6)), "encoder_query", "D=8")
case("nrcg-shape-encoder_key-B", "nrc_grad", reshape("encoder_key", (3, 2, 2, 8)), "encoder_key", "B=1")
case("nrcg-shape-norm_key_weight-rank2", "nrc_grad", reshape("norm_key_weight", (8, 1)), "norm_key_weight", "rank")
case("nrcg-shape-norm_query_weight-len", "nrc_grad", reshape("norm_query_weight", (6,)), "norm_query_weight", "D=8")
case("nrcg-shape-norm_query_mean-rank3", "nrc_grad", reshape("norm_query_mean", (1, 4, 2)), "norm_query_mean", "rank")
case("nrcg-shape-norm_query_mean-S", "nrc_grad", reshape("norm_query_mean", (1, 5, 2, 1)), "norm_query_mean", "Sq=4")
case("nrcg-shape-norm_key_rstd-last", "nrc_grad", reshape("norm_key_rstd", (1, 3, 2, 2)), "norm_key_rstd",
     "[1, 3, 2, 2]")
case("nrcg-shape-norm_added_query_mean-B", "nrc_grad", reshape("norm_added_query_mean", (2, 2, 2, 1)),
     "norm_added_query_mean", "B=1")
case("nrcg-shape-rope_cos-rank3", "nrc_grad", reshape("rope_cos", (2, 8, 1)), "rope_cos", "rank")
case("nrcg-shape-rope_sin-D", "nrc_grad", reshape("rope_sin", (2, 6)), "rope_sin", "D=8")
case("nrcg-shape-rope_cos-rows", "nrc_grad", reshape("rope_cos", (3, 8)), "rope_cos", "R=2")
case("nrcg-D-odd", "nrc_grad", dims(D=7), "grad_query_output", ("D=7", "multiple of 2"))
case("nrcg-D-1026", "nrc_grad", dims(D=1026), "grad_query_output", ("D=1026", "<= 1024"))
case("nrcg-rope-R-0", "nrc_grad", dims(R=0), "rope_sin", ("R=0", ">= 1"))
case("nrcg-rope-R-gt-SK", "nrc_grad", dims(R=6), "rope_sin", ("exceed", "key"))
case("nrcg-rope-R-gt-SQ", "nrc_grad", dims(R=7), "rope_sin", "exceed")
case("nrcg-attr-norm_type-3", "nrc_grad", attr(norm_type=3), "norm_type", "must be one of")
case("nrcg-attr-norm_added_type-9", "nrc_grad", attr(norm_added_type=9), "norm_added_type", "must be one of")
case("nrcg-attr-rope_type-3", "nrc_grad", attr(rope_type=3), "rope_type", "must be one of")
case("nrcg-attr-concat_order-2", "nrc_grad", attr(concat_order=2), "concat_order", "must be one of")
case("nrcg-attr-concat_order-bool", "nrc_grad", attr(concat_order="yes"), "concat_order", "type int")
case("nrcg-unknown-attr-eps", "nrc_grad", attr(eps=1e-5), "eps", "unknown attribute")
case("nrcg-unknown-input-value", "nrc_grad", put("value", lambda _: np.zeros((1, 3, 2, 8), np.float32)), "value",
     "unknown input")
for _n in ("norm_query_weight", "norm_added_key_weight"):
    case(f"nrcg-missing-{_n}", "nrc_grad", drop(_n), _n, ("required", "== 2"))
for _n in ("norm_key_mean", "norm_added_query_rstd"):
    case(f"nrcg-missing-{_n}", "nrc_grad", drop(_n), _n, ("required", ">= 1"))
case("nrcg-missing-rope_cos", "nrc_grad", drop("rope_cos"), "rope_cos", "required")

# ---- NsaSelectedAttention (docs/reference/nsa_selected_attention.md §3.1, §3.2 + opgen's stricter checks) ----------
for _n in ("query", "key", "value", "topk_indices"):
    case(f"nsa-A1-null-{_n}", "nsa", drop(_n), _n, "required")
for _n in ("actual_seq_qlen", "actual_seq_kvlen"):
    case(f"nsa-A1-null-{_n}", "nsa", drop(_n), _n, ("required", "TND"))
case("nsa-A1-missing-input_layout", "nsa", unattr("input_layout"), "input_layout", "required")
case("nsa-A4-layout-BSND", "nsa", attr(input_layout="BSND"), "input_layout", "must be one of")
case("nsa-A4-layout-tnd", "nsa", attr(input_layout="tnd"), "input_layout", "must be one of")
case("nsa-A5-query-rank4", "nsa", reshape("query", (4, 4, 32, 1)), "query", "rank")
case("nsa-A6-key-D", "nsa", reshape("key", (64, 2, 48)), "key", "D=32")
case("nsa-A7-Dv-gt-D", "nsa", dims(Dv=48), "value", ("Dv", "exceed"))
case("nsa-A8-D-784", "nsa", dims(D=784), "query", ("D=784", "<= 768"))
case("nsa-A9-T13-Bn-1025", "nsa", dims(T1=1025, T2=1025 * 16, Bn=1025), ("actual_seq_qlen", "actual_seq_kvlen"),
     ("Bn=1025", "<= 1024"))
case("nsa-A10-N2-0", "nsa", dims(N2=0), "key", ("N2=0", ">= 1"))
case("nsa-A10-D-0", "nsa", dims(D=0), "query", ("D=0", ">= 1"))
case("nsa-T15-G-0", "nsa", dims(N1=1), "query", "multiple")
case("nsa-N1-not-multiple-of-N2", "nsa", dims(N1=3), "query", "multiple")
case("nsa-T4-bs-144", "nsa", attr(selected_block_size=144), "selected_block_size", "<= 128")
case("nsa-T5-bs-24", "nsa", attr(selected_block_size=24), "selected_block_size", "multiple of 16")
case("nsa-T6-CNT-33", "nsa", dims(CNT=33), ("topk_indices", "selected_block_count"), "<= 32")
case("nsa-T7-head_num-0", "nsa", attr(head_num=0), "head_num", "N1=4")
case("nsa-T17-head_num-3", "nsa", attr(head_num=3), "head_num", "N1=4")
case("nsa-head_num-2", "nsa", attr(head_num=2), "head_num", "N1=4")
case("nsa-T8-sparse_mode-1", "nsa", attr(sparse_mode=1), "sparse_mode", "must be one of")
case("nsa-T8-sparse_mode-3-nomask", "nsa_nomask", attr(sparse_mode=3), "sparse_mode", "must be one of")
case("nsa-T9-dtype-T-float32", "nsa", dtypes(T="float32"), ("T", "query"), "not supported")
case("nsa-T10-count-ne-topk", "nsa", attr(selected_block_count=3), "selected_block_count", "CNT=2")
case("nsa-T11-key-rank2", "nsa", reshape("key", (64, 64)), "key", "rank")
case("nsa-T11-topk-rank2", "nsa", reshape("topk_indices", (4, 4)), "topk_indices", "rank")
case("nsa-T12-kvlen-len3", "nsa", put("actual_seq_kvlen", lambda _: np.array([16, 32, 64], np.int64)),
     "actual_seq_kvlen", "Bn=2")
case("nsa-T14-qlen-end-gt-T1", "nsa", put("actual_seq_qlen", lambda _: np.array([2, 5], np.int64)),
     "actual_seq_qlen", "T1")
case("nsa-T14-kvlen-end-gt-T2", "nsa", put("actual_seq_kvlen", lambda _: np.array([32, 65], np.int64)),
     "actual_seq_kvlen", "T2")
case("nsa-cu-qlen-end-lt-T1", "nsa", put("actual_seq_qlen", lambda _: np.array([2, 3], np.int64)),
     "actual_seq_qlen", "T1")
case("nsa-cu-kvlen-end-lt-T2", "nsa", put("actual_seq_kvlen", lambda _: np.array([32, 48], np.int64)),
     "actual_seq_kvlen", "T2")
case("nsa-cu-qlen-non-increasing", "nsa", put("actual_seq_qlen", lambda _: np.array([4, 4], np.int64)),
     "actual_seq_qlen", "increasing")
case("nsa-cu-kvlen-decreasing", "nsa", put("actual_seq_kvlen", lambda _: np.array([70, 64], np.int64)),
     "actual_seq_kvlen", "increasing")
case("nsa-cu-qlen-fractional", "nsa", put("actual_seq_qlen", lambda _: np.array([2.5, 4.0])), "actual_seq_qlen",
     "integer")
case("nsa-T18-mask-float16", "nsa", put("atten_mask", lambda a: a.astype(np.float16)), "atten_mask", "bool")
case("nsa-T18-dtype-M-float16", "nsa", dtypes(T="float16", M="float16"), ("M", "atten_mask"), "not supported")
case("nsa-T19-mask-rank3", "nsa", reshape("atten_mask", (8, 8, 1)), "atten_mask", "rank")
case("nsa-shape-topk-T1", "nsa", reshape("topk_indices", (5, 2, 2)), "topk_indices", "T1=4")
case("nsa-shape-topk-N2", "nsa", reshape("topk_indices", (4, 3, 2)), "topk_indices", "N2=2")
case("nsa-topk-negative", "nsa", edit("topk_indices", _set((1, 0, 1), -1)), "topk_indices", "outside its batch")
case("nsa-topk-past-batch", "nsa", edit("topk_indices", _set((3, 1, 1), 2)), "topk_indices", "outside its batch")
case("nsa-topk-huge", "nsa", edit("topk_indices", _set((0, 0, 0), 1000)), "topk_indices", "outside its batch")
case("nsa-topk-fractional", "nsa", put("topk_indices", lambda a: a.astype(np.float32) + 0.5), "topk_indices",
     "integer")
case("nsa-topk-int32-range", "nsa", put("topk_indices", lambda a: a.astype(np.int64) + 2**31), "topk_indices",
     "int32")
case("nsa-fully-masked-row", "nsa", edit("topk_indices", _set((0, 0), 1)), "topk_indices", "future")
case("nsa-unknown-attr-scaleValue", "nsa", attr(scaleValue=0.5), "scaleValue", "unknown attribute")
case("nsa-attr-scale_value-str", "nsa", attr(scale_value="big"), "scale_value", "type float")
case("nsa-attr-input_layout-int", "nsa", attr(input_layout=0), "input_layout", "type str")
case("nsa-attr-head_num-bool", "nsa", attr(head_num=True), "head_num", "type int")
case("nsa-attr-head_num-float", "nsa", attr(head_num=4.5), "head_num", "type int")
case("nsa-overflow-query-fp16", "nsa", overflow16("query"), "query", ("overflow", "float16"))

# ---- NsaSelectedAttentionGrad (§3.3 B1-B6, §3.4 G1-G16, H1-H3 + opgen's stricter checks) -----------
for _n in ("query", "key", "value", "attentionOut", "attentionOutGrad", "softmaxMax", "softmaxSum", "topkIndices"):
    case(f"nsag-B1-null-{_n}", "nsa_grad", drop(_n), _n, "required")
case("nsag-B3-T1-0", "nsa_grad", dims(T1=0), "query", ("T1=0", ">= 1"))
case("nsag-B5-layout-BSND", "nsa_grad", attr(inputLayout="BSND"), "inputLayout", "must be one of")
case("nsag-G5-layout-tnd", "nsa_grad", attr(inputLayout="tnd"), "inputLayout", "must be one of")
case("nsag-G1-sparseMode-1", "nsa_grad", attr(sparseMode=1), "sparseMode", "must be one of")
case("nsag-G2-key-D", "nsa_grad", reshape("key", (64, 2, 48)), "key", "D=32")
case("nsag-G3-Dv-gt-D", "nsa_grad", dims(Dv=48), "value", ("Dv", "exceed"))
case("nsag-G4-headNum-0", "nsa_grad", attr(headNum=0), "headNum", "N1=4")
case("nsag-headNum-2", "nsa_grad", attr(headNum=2), "headNum", "N1=4")
case("nsag-G6-query-rank2", "nsa_grad", reshape("query", (4, 128)), "query", "rank")
for _n in ("actualSeqQLen", "actualSeqKVLlen"):
    case(f"nsag-G7-null-{_n}", "nsa_grad", drop(_n), _n, ("required", "TND"))
case("nsag-G8-kvlen-len3", "nsa_grad", put("actualSeqKVLlen", lambda _: np.array([16, 32, 64], np.int64)),
     "actualSeqKVLlen", "Bn=2")
case("nsag-G10-N2-0", "nsa_grad", dims(N2=0), "key", ("N2=0", ">= 1"))
case("nsag-G10-G-0", "nsa_grad", dims(N1=1), "query", "multiple")
case("nsag-N1-not-multiple-of-N2", "nsa_grad", dims(N1=3), "query", "multiple")
case("nsag-G12-attentionOut-bf16", "nsa_grad", cast("attentionOut", BF16), "attentionOut", "bfloat16")
case("nsag-G13-D-0", "nsa_grad", dims(D=0), "query", ("D=0", ">= 1"))
case("nsag-G13-Dv-0", "nsa_grad", dims(Dv=0), "value", ("Dv=0", ">= 1"))
case("nsag-G14-softmaxMax-last", "nsa_grad", reshape("softmaxMax", (4, 4, 1)), "softmaxMax", "expected 8")
case("nsag-G14-softmaxSum-rank2", "nsa_grad", reshape("softmaxSum", (4, 32)), "softmaxSum", "rank")
case("nsag-G14-softmaxMax-N1", "nsa_grad", reshape("softmaxMax", (4, 2, 8)), "softmaxMax", "N1=4")
case("nsag-G15-attentionOut-rank4", "nsa_grad", reshape("attentionOut", (4, 4, 16, 1)), "attentionOut", "rank")
case("nsag-G16-attentionOut-T1", "nsa_grad", reshape("attentionOut", (5, 4, 16)), "attentionOut", "T1=4")
case("nsag-G16-attentionOut-Dv", "nsa_grad", reshape("attentionOut", (4, 4, 32)), "attentionOut", "Dv=16")
case("nsag-shape-attentionOutGrad-Dv", "nsa_grad", reshape("attentionOutGrad", (4, 4, 32)), "attentionOutGrad",
     "Dv=16")
case("nsag-shape-topk-N2", "nsa_grad", reshape("topkIndices", (4, 3, 2)), "topkIndices", "N2=2")
case("nsag-H1-qlen-first-0", "nsa_grad", put("actualSeqQLen", lambda _: np.array([0, 4], np.int64)), "actualSeqQLen",
     Any("positive", "increasing"))
case("nsag-H1-kvlen-empty-batch", "nsa_grad", put("actualSeqKVLlen", lambda _: np.array([64, 64], np.int64)),
     "actualSeqKVLlen", "increasing")
case("nsag-H2-CNT-129", "nsa_grad", dims(CNT=129), ("topkIndices", "selectedBlockCount"), "128")
case("nsag-H2-CNT-0", "nsa_grad", dims(CNT=0), ("topkIndices", "selectedBlockCount"), ("CNT=0", ">= 1"))
case("nsag-H3-bs-8", "nsa_grad", attr(selectedBlockSize=8), "selectedBlockSize", ">= 16")
case("nsag-H3-bs-144", "nsa_grad", attr(selectedBlockSize=144), "selectedBlockSize", "<= 128")
case("nsag-H3-bs-24", "nsa_grad", attr(selectedBlockSize=24), "selectedBlockSize", "multiple of 16")
case("nsag-cu-qlen-end-gt-T1", "nsa_grad", put("actualSeqQLen", lambda _: np.array([2, 6], np.int64)),
     "actualSeqQLen", "T1")
case("nsag-cu-kvlen-end-lt-T2", "nsa_grad", put("actualSeqKVLlen", lambda _: np.array([32, 60], np.int64)),
     "actualSeqKVLlen", "T2")
case("nsag-cu-qlen-decreasing", "nsa_grad", put("actualSeqQLen", lambda _: np.array([5, 4], np.int64)),
     "actualSeqQLen", "increasing")
case("nsag-topk-negative", "nsa_grad", edit("topkIndices", _set((2, 1, 0), -3)), "topkIndices", "outside its batch")
case("nsag-topk-past-batch", "nsa_grad", edit("topkIndices", _set((1, 0, 1), 2)), "topkIndices", "outside its batch")
case("nsag-topk-fractional", "nsa_grad", put("topkIndices", lambda a: a.astype(np.float64) + 0.25), "topkIndices",
     "integer")
case("nsag-fully-masked-row", "nsa_grad", edit("topkIndices", _set((2, 1), 1)), "topkIndices", "future")
case("nsag-attenMsk-float16", "nsa_grad", put("attenMsk", lambda _: np.ones((8, 8), np.float16)), "attenMsk", "bool")
case("nsag-unknown-attr-scale_value", "nsa_grad", attr(scale_value=0.5), "scale_value", "unknown attribute")
case("nsag-unknown-input-atten_mask", "nsa_grad", put("atten_mask", lambda _: np.ones((8, 8), np.bool_)),
     "atten_mask", "unknown input")
case("nsag-attr-selectedBlockSize-str", "nsa_grad", attr(selectedBlockSize="sixteen"), "selectedBlockSize",
     "type int")
case("nsag-overflow-attentionOutGrad-fp16", "nsa_grad", overflow16("attentionOutGrad"), "attentionOutGrad",
     ("overflow", "float16"))
case("nsag-overflow-softmaxSum-fp32", "nsa_grad", put("softmaxSum", lambda a: a.astype(np.float64) * 1e39),
     "softmaxSum", ("overflow", "float32"))


# =====================================================================================
# Tests
# =====================================================================================

_EXPECTED_SHAPES = {
    "AdaLayerNormGrad": lambda i: {"pd_x": i["dy"].shape, "pd_scale": i["scale"].shape,
                                   "pd_shift": i["scale"].shape, "pd_gamma": i["dy"].shape[-1:],
                                   "pd_beta": i["dy"].shape[-1:]},
    "AdaLayerNormV2": lambda i: {"out": i["x"].shape, "mean": i["x"].shape[:-1] + (1,),
                                 "rstd": i["x"].shape[:-1] + (1,)},
    "NormRopeConcat": lambda i: {
        "query_output": (i["query"].shape[0], i["query"].shape[2],
                         i["query"].shape[1] + i["encoder_query"].shape[1], i["query"].shape[3]),
        "key_output": (i["key"].shape[0], i["key"].shape[2], i["key"].shape[1] + i["encoder_key"].shape[1],
                       i["key"].shape[3]),
        "norm_query_mean": i["query"].shape[:3] + (1,)},
    "NormRopeConcatGrad": lambda i: {"grad_query": i["query"].shape, "grad_key": i["key"].shape,
                                     "grad_encoder_query": i["encoder_query"].shape,
                                     "grad_norm_added_key_weight": i["query"].shape[-1:]},
    "NsaSelectedAttention": lambda i: {"attention_out": i["query"].shape[:2] + i["value"].shape[2:],
                                       "softmax_max": i["query"].shape[:2] + (8,)},
    "NsaSelectedAttentionGrad": lambda i: {"dq": i["query"].shape, "dk": i["key"].shape, "dv": i["value"].shape},
}


@pytest.mark.parametrize("base", sorted(BASES))
def test_valid_base_passes(base):
    """Every valid base (incl. docs/reference/ada_layer_norm.md §2.3 should-succeed list) runs; output shapes follow the notes."""
    op, inputs, attrs, dt = build(base)
    out = interpret(op, inputs, attrs, dt)
    for name, shape in _EXPECTED_SHAPES[op](inputs).items():
        assert name in out, f"{op}: missing output {name}"
        assert tuple(out[name].shape) == tuple(shape), (name, out[name].shape, shape)
    for name, v in out.items():
        assert np.isfinite(np.asarray(v, np.float64)).all(), f"{op}.{name} has non-finite values"


def _param_names(op):
    spec = load_spec(op)
    return {p.name for p in spec.inputs} | {a.name for a in spec.attrs} | set(spec.dtype_vars_)


def _phrase_ok(rule, phrase):
    if isinstance(phrase, tuple):
        return all(_phrase_ok(rule, p) for p in phrase)
    if isinstance(phrase, Any):
        return any(a.lower() in rule.lower() for a in phrase.alts)
    return phrase.lower() in rule.lower()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_raises(case):
    """Each reference bad-input item (module table) -> one ValidationError naming the spec parameter + rule."""
    op, inputs, attrs, dt = build(case.base)
    c = Ctx(case.base, op, {k: v for k, v in inputs.items()}, dict(attrs), dt)
    case.mutate(c)
    with pytest.raises(ValidationError) as ei:
        interpret(c.op, c.inputs, c.attrs, c.dtypes)
    e = ei.value
    allowed = case.param if isinstance(case.param, tuple) else (case.param,)
    assert e.param in allowed, f"param {e.param!r} (rule: {e.rule}); expected one of {allowed}"
    known = _param_names(op)
    unknown_ok = "unknown" in e.rule.lower()     # an unknown name is reported under that very name
    assert e.param in known or unknown_ok, f"{e.param!r} is not a parameter of {op}"
    assert _phrase_ok(e.rule, case.phrase), f"rule {e.rule!r} lacks {case.phrase!r}"
    assert str(e) == f"{e.param}: {e.rule}" and "\n" not in str(e)
    assert "np." not in e.rule, f"rule {e.rule!r} shows a NumPy repr"


def test_case_ids_unique_and_bases_known():
    """Bookkeeping: every case id is unique and names a defined valid base."""
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert all(c.base in BASES for c in CASES)
