"""FlashAttentionUnpaddingScoreGrad (aclnnFlashAttentionUnpaddingScoreGrad; FlashAttentionScoreGrad in the TND
layout): the backward of examples/specs/flash_attention_var_len_score.py -- dq, dk, dv of dense attention over batches
of variable lengths stored concatenated, from the forward's saved softmax max / sum, GQA, optional causal masking
within each batch.

Facts (CANN's aclnnFlashAttentionUnpaddingScoreGrad document, ops-transformer attention/flash_attention_score_grad):
query / dy / attention_in [T1, N1, D], key / value [T2, N2, D]; actualSeqQLen / actualSeqKvLen the cumulative ends of
the batches (each batch its own attention); softmax_max / softmax_sum the forward's fp32 [T1, N1, 8]; dq / dk / dv
stored as query / key / value; sparse_mode 2 leftUpCausal within the batch, the atten_mask tensor read only for its
presence. The subset: input_layout "TND", fp16 / bf16, D a multiple of 16, sparse_mode 0 or 2, no dropout / pse /
padding mask / prefix (refused: 161002);
the parameter list is CANN's (its aclnn signature).

FlashAttention-2's backward per batch (as examples/specs/flash_attention_score_grad.py, the batch mask of the
forward's spec keeping each query token to its batch's keys): P = exp(scale S - max) / sum recomputed from the saved
statistics, dP = dO Vᵀ, D_r = rowsum(dO * O), dS = P (dP - D_r) rounded to T, dQ = scale dS K, dK = scale sum_G
dSᵀ Q, dV = sum_G Pᵀ dO (P rounded to T). The attention family lowers it as the dense backward (docs/design.md
"Kernel families", attention: TND), each unit's keys its batch's.
"""

import numpy as np

from opgen.dsl import A2, A3, OpSpec, api, bf16, boolean, cumulative_ends, f16, f32, i64, u8
from opgen.dsl.tnd import token_batches

FLT_MAX = 3.4028234663852886e38

spec = OpSpec("FlashAttentionUnpaddingScoreGrad", aclnn="aclnnFlashAttentionUnpaddingScoreGrad", socs=(A2, A3),
              round="round", doc="Dense attention backward over batches of variable lengths (TND): dq, dk, dv from "
                                 "the saved softmax max / sum, GQA, optional causal mask.",
              source="CANN's aclnnFlashAttentionUnpaddingScoreGrad document (ops-transformer "
                     "attention/flash_attention_score_grad)")
T1, T2, N2 = spec.dims("T1 T2 N2")
N1 = spec.dim("N1")
Bn = spec.dim("Bn", max=1024)
D = spec.dim("D", max=512, multiple_of=16)
MS1, MS2 = spec.dims("MS1 MS2")
T, M = spec.dtype_vars("T M")
spec.input("query", T, [T1, N1, D])
spec.input("key", T, [T2, N2, D])
spec.input("value", T, [T2, N2, D])
spec.input("dy", T, [T1, N1, D], doc="the gradient of the forward's attention_out")
spec.input("pse_shift", T, [T1, N1, T2], optional=True, accepts="absent", unsupported="pse")
spec.input("drop_mask", u8, [T1, N1, T2], optional=True, accepts="absent", unsupported="dropout")
spec.input("padding_mask", T, [T1, T2], optional=True, accepts="absent", unsupported="a padding mask")
spec.input("atten_mask", M, [MS1, MS2], optional=True,
           doc="values never read: its presence with sparse_mode 2 selects causal masking within each batch")
spec.input("softmax_max", f32, [T1, N1, 8], doc="the forward's row max of the scaled, masked scores (8 copies)")
spec.input("softmax_sum", f32, [T1, N1, 8], doc="the forward's row sum of exp(score - max) (8 copies)")
spec.input("softmax_in", T, [T1, N1, 8], optional=True, accepts="absent",
           unsupported="the forward's softmax_out, reserved by CANN")
spec.input("attention_in", T, [T1, N1, D], doc="the forward's attention_out")
spec.input("prefix", i64, [Bn], optional=True, host=True, accepts="absent", unsupported="the prefix of sparse_mode 6")
spec.input("actual_seq_qlen", i64, [Bn], host=True, doc="cumulative query ends of the batches")
spec.input("actual_seq_kvlen", i64, [Bn], host=True, doc="cumulative key / value ends of the batches")
spec.attr("scale_value", float, 1.0)
spec.attr("keep_prob", float, 1.0, accepts=(1.0,), unsupported="dropout")
spec.attr("pre_tockens", int, 2147483647, doc="no effect: sparse_mode 0 without atten_mask and 2 do not read it")
spec.attr("next_tockens", int, 2147483647, doc="no effect: sparse_mode 0 without atten_mask and 2 do not read it")
spec.attr("head_num", int, 1, dim=N1, doc="the query's heads N1: must equal query.shape[1]")
spec.attr("input_layout", str, None, choices=("TND",), static=True, required=True)
spec.attr("inner_precise", int, 0, doc="no effect on this kernel's arithmetic")
spec.attr("sparse_mode", int, 0, choices=(0, 2), static=True,
          doc="0: no mask within a batch; 2: leftUpCausal within each batch (needs atten_mask)")
spec.output("dq", T, [T1, N1, D])
spec.output("dk", T, [T2, N2, D])
spec.output("dv", T, [T2, N2, D])
spec.output("dpse", T, [T1, N1, T2], optional=True, doc="the gradient of pse: never written (no pse)")
spec.dtypes((T, M), [(f16, boolean), (f16, u8), (bf16, boolean), (bf16, u8)])
spec.require((N1 % N2).eq(0), "query", "query heads N1 must be a multiple of the kv heads N2 (GQA)")
spec.check("atten_mask", lambda a, pr: None if not (a["sparse_mode"] == 0 and pr["atten_mask"]) else
           "an explicit mask ({sparse_mode} 0 with {atten_mask}) is not supported; "
           "use {sparse_mode} 2 for causal masking")
spec.check("atten_mask", lambda a, pr: None if not (a["sparse_mode"] == 2 and not pr["atten_mask"]) else
           "{sparse_mode} 2 (leftUpCausal) needs the {atten_mask} tensor")


# the ends the kernel walks: checked by the interpreter and by the emitted aclnn layer alike (opgen.dsl.checks)
spec.check("actual_seq_qlen", cumulative_ends("actual_seq_qlen", "T1"), on="values")
spec.check("actual_seq_kvlen", cumulative_ends("actual_seq_kvlen", "T2"), on="values")
spec.package("ops-transformer", "attention")
spec.example_call({"T1": 9, "T2": 21, "N1": 2, "N2": 1, "D": 16, "Bn": 2})
# CANN's public signature (its aclnnFlashAttentionUnpaddingScoreGrad document): camelCase names in its order, the
# host arrays, const output tensors; what this kernel does not implement is refused by the values above (161002).
spec.aclnn_signature(
    api.param("query"), api.param("keyIn", "key"), api.param("value"), api.param("dy"),
    api.param("pseShiftOptional", "pse_shift"), api.param("dropMaskOptional", "drop_mask"),
    api.param("paddingMaskOptional", "padding_mask"), api.param("attenMaskOptional", "atten_mask"),
    api.param("softmaxMaxOptional", "softmax_max"), api.param("softmaxSumOptional", "softmax_sum"),
    api.param("softmaxInOptional", "softmax_in"), api.param("attentionInOptional", "attention_in"),
    api.param("prefixOptional", "prefix"), api.param("actualSeqQLenOptional", "actual_seq_qlen"),
    api.param("actualSeqKvLenOptional", "actual_seq_kvlen"), api.param("scaleValue", "scale_value"),
    api.param("keepProb", "keep_prob"), api.param("preTokens", "pre_tockens"),
    api.param("nextTokens", "next_tockens"), api.param("headNum", "head_num"),
    api.param("inputLayout", "input_layout", ctype="char*"), api.param("innerPrecise", "inner_precise"),
    api.param("sparseMode", "sparse_mode"), api.param("dqOut", "dq"), api.param("dkOut", "dk"),
    api.param("dvOut", "dv"), api.param("dpseOut", "dpse"),
    const_outputs=True)
spec.opdef_note("dpse is OPTIONAL here (REQUIRED in CANN's OpDef): without pse the kernel never writes it.")
spec.aclnn_note("Stricter than CANN's aclnnFlashAttentionUnpaddingScoreGrad: softmaxMaxOptional, "
                "softmaxSumOptional, attentionInOptional, actualSeqQLenOptional and actualSeqKvLenOptional are "
                "required despite their names (the kernel reads them), and pseShiftOptional, dropMaskOptional, "
                "paddingMaskOptional, softmaxInOptional, prefixOptional and keepProb < 1 are refused (161002); "
                "dpseOut is never written (no pse).")


@spec.body
def _(b, query, key, value, dy, pse_shift, drop_mask, padding_mask, atten_mask, softmax_max, softmax_sum, softmax_in,
      attention_in, prefix, actual_seq_qlen, actual_seq_kvlen, scale_value, keep_prob, pre_tockens, next_tockens,
      head_num, input_layout, inner_precise, sparse_mode):
    G = N1 // N2
    bq, q0 = token_batches(b, actual_seq_qlen, T1, Bn)
    bk, k0 = token_batches(b, actual_seq_kvlen, T2, Bn)
    masked = bq.reshape([T1, 1]).ne(bk.reshape([1, T2]))
    if sparse_mode == 2 and atten_mask is not None:
        masked = masked | ((b.iota(T2) - k0).reshape([1, T2]) > (b.iota(T1) - q0).reshape([T1, 1]))

    def heads(x):   # [T1, N1, D] -> [N2, G, T1, D]
        return x.permute(1, 0, 2).reshape([N2, G, T1, D])

    qg, dyg, og = heads(query), heads(dy), heads(attention_in)
    kg = key.permute(1, 0, 2).reshape([N2, 1, T2, D]).broadcast_to([N2, G, T2, D])
    vg = value.permute(1, 0, 2).reshape([N2, 1, T2, D]).broadcast_to([N2, G, T2, D])
    scores = b.matmul(qg, kg, transpose_b=True) * scale_value
    scores = b.where(masked.reshape([1, 1, T1, T2]), -FLT_MAX, scores)

    def stat(x):   # a saved statistic's column 0 [T1, N1, 1] -> [N2, G, T1, 1]
        return x.slice(-1, 0, 1).permute(1, 0, 2).reshape([N2, G, T1, 1])

    p = b.exp(scores - stat(softmax_max)) / stat(softmax_sum)                  # P recomputed, fp32
    dp = b.matmul(dyg, vg, transpose_b=True)
    dr = (dyg * og).sum(-1)
    ds = b.quantize(p * (dp - dr), T, "round")                                 # dS / scale, T for the cube
    p = b.quantize(p, T, "round")                                              # P, T for the cube
    dq = (b.matmul(ds, kg).reshape([N1, T1, D]) * scale_value).permute(1, 0, 2)
    dk = (b.matmul(ds, qg, transpose_a=True).sum(1, keepdims=False) * scale_value).permute(1, 0, 2)
    dv = b.matmul(p, dyg, transpose_a=True).sum(1, keepdims=False).permute(1, 0, 2)
    return {"dq": dq.cast(T, "rint"), "dk": dk.cast(T, "rint"), "dv": dv.cast(T, "rint")}


@spec.example
def _(rng, inputs, env, attrs):
    """Cumulative ends of Bn non-empty batches of random lengths (T1, T2 >= Bn); the saved statistics are left
    random, not a forward's (tests/test_flash_attention_var_len.py runs the backward on real forwards)."""
    for name, total in (("actual_seq_qlen", env["T1"]), ("actual_seq_kvlen", env["T2"])):
        nb = env["Bn"]
        cuts = np.sort(rng.choice(np.arange(1, total), nb - 1, replace=False)) if nb > 1 else np.array([], int)
        inputs[name] = np.concatenate([cuts, [total]]).astype(np.int64)
