"""FlashAttentionVarLenScore (aclnnFlashAttentionVarLenScore), forward: dense attention over batches of variable
lengths stored concatenated (the TND layout), GQA (N1 = G * N2), optional causal masking within each batch.

Facts (CANN's aclnnFlashAttentionVarLenScore document, ops-transformer attention/flash_attention_score): query
[T1, N1, D], key / value [T2, N2, D] with T1 / T2 the sum of the batches' query / key lengths; actualSeqQLen and
actualSeqKvLen hold the cumulative ends of the batches (batch b's query tokens are actual_seq_qlen[b - 1] ..
actual_seq_qlen[b] - 1, the first starting at 0); a query token attends to the keys of its own batch only;
softmax_max and softmax_sum are fp32 [T1, N1, 8] (8 equal copies of the row's max of the scaled, masked scores and of
its sum of exp(score - max)); sparse_mode 2 is leftUpCausal within the batch (the batch's query row i sees its keys
0 .. i); it takes the atten_mask tensor only for its presence; the scale is applied before the mask.

The subset this spec supports (the parameters are CANN's, aclnn signature included; what is not implemented is
refused, 161002 in the aclnn layer):
  * input_layout "TND" only; fp16 and bf16; D a multiple of 16 (the cube's fractal), the value's head dim D too;
  * sparse_mode 0 without atten_mask (no masking inside a batch) and 2 with it (causal); an explicit mask is refused;
  * every batch has at least one query and one key (strictly increasing cumulative ends, the last equal to T1 /
    T2: checked on the values);
  * no dropout (keep_prob 1 only), real_shift (pse), drop_mask, padding_mask, prefix: refused when given;
    pre_tockens / next_tockens have no effect (sparse_mode 0 without a mask and 2 do not read them), nor has
    inner_precise; softmax_out (reserved by CANN) is never written.
P = softmax(...) is rounded to the data type before P V; attention_out is rounded to nearest even (rint).

The attention family lowers it as a dense key set per batch (docs/design.md "Kernel families", attention): the
mask that keeps a query token to its own batch's keys is recognised by its values (`attnprog.batch_mask_kind`) and
becomes the units' key range -- units of (batch, kv head, block of query rows, group of heads), each batch with its
own query and key counts from the cumulative arrays, query blocks and key chunks with tails at the batch's end,
the units of all batches split over the AI Cores.
"""

import numpy as np

from opgen.dsl import A2, A3, OpSpec, api, bf16, boolean, cumulative_ends, f16, f32, i64, u8
from opgen.dsl.tnd import token_batches

FLT_MAX = 3.4028234663852886e38

spec = OpSpec("FlashAttentionVarLenScore", aclnn="aclnnFlashAttentionVarLenScore", socs=(A2, A3), round="round",
              doc="Dense attention forward over batches of variable lengths (TND), GQA, optional causal mask.",
              source="CANN's aclnnFlashAttentionVarLenScore document (ops-transformer attention/flash_attention_score)")
T1, T2, N2 = spec.dims("T1 T2 N2")
N1 = spec.dim("N1")
Bn = spec.dim("Bn", max=1024)
D = spec.dim("D", max=512, multiple_of=16)
MS1, MS2 = spec.dims("MS1 MS2")
T, M = spec.dtype_vars("T M")

spec.input("query", T, [T1, N1, D])
spec.input("key", T, [T2, N2, D])
spec.input("value", T, [T2, N2, D])
spec.input("real_shift", T, [T1, N1, T2], optional=True, accepts="absent", unsupported="pse")
spec.input("drop_mask", u8, [T1, N1, T2], optional=True, accepts="absent", unsupported="dropout")
spec.input("padding_mask", T, [T1, T2], optional=True, accepts="absent", unsupported="a padding mask")
spec.input("atten_mask", M, [MS1, MS2], optional=True,
           doc="values never read: its presence with sparse_mode 2 selects causal masking within each batch")
spec.input("prefix", i64, [Bn], optional=True, host=True, accepts="absent", unsupported="the prefix of sparse_mode 6")
spec.input("actual_seq_qlen", i64, [Bn], host=True, doc="cumulative query ends of the batches")
spec.input("actual_seq_kvlen", i64, [Bn], host=True, doc="cumulative key / value ends of the batches")

spec.attr("scale_value", float, 1.0)
spec.attr("keep_prob", float, 1.0, accepts=(1.0,), unsupported="dropout")
spec.attr("pre_tockens", int, 2147483647, doc="no effect: sparse_mode 0 without atten_mask and 2 do not read it")
spec.attr("next_tockens", int, 2147483647, doc="no effect: sparse_mode 0 without atten_mask and 2 do not read it")
spec.attr("head_num", int, 1, dim=N1, doc="the query's heads N1: must equal query.shape[1]")
spec.attr("input_layout", str, None, choices=("TND",), static=True, required=True)
spec.attr("inner_precise", int, 0, doc="no effect (CANN: not used yet)")
spec.attr("sparse_mode", int, 0, choices=(0, 2), static=True,
          doc="0: no mask within a batch; 2: leftUpCausal within each batch (needs atten_mask)")

spec.output("softmax_max", f32, [T1, N1, 8])
spec.output("softmax_sum", f32, [T1, N1, 8])
spec.output("softmax_out", T, [T1, N1, 8], optional=True, doc="reserved by CANN: accepted, never written")
spec.output("attention_out", T, [T1, N1, D])

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
# CANN's public signature (its aclnnFlashAttentionVarLenScore document): camelCase names in its order, the host
# arrays, const output tensors; what this kernel does not implement is refused by the values above (161002).
spec.aclnn_signature(
    api.param("query"), api.param("key"), api.param("value"), api.param("realShiftOptional", "real_shift"),
    api.param("dropMaskOptional", "drop_mask"), api.param("paddingMaskOptional", "padding_mask"),
    api.param("attenMaskOptional", "atten_mask"), api.param("prefixOptional", "prefix"),
    api.param("actualSeqQLenOptional", "actual_seq_qlen"), api.param("actualSeqKvLenOptional", "actual_seq_kvlen"),
    api.param("scaleValue", "scale_value"), api.param("keepProb", "keep_prob"),
    api.param("preTokens", "pre_tockens"), api.param("nextTokens", "next_tockens"),
    api.param("headNum", "head_num"), api.param("inputLayout", "input_layout", ctype="char*"),
    api.param("innerPrecise", "inner_precise"), api.param("sparseMode", "sparse_mode"),
    api.param("softmaxMaxOut", "softmax_max"), api.param("softmaxSumOut", "softmax_sum"),
    api.param("softmaxOutOut", "softmax_out"), api.param("attentionOutOut", "attention_out"),
    const_outputs=True)
spec.opdef_note("softmax_out is OPTIONAL here (REQUIRED in CANN's OpDef): the kernel never writes it.")
spec.aclnn_note("Stricter than CANN's aclnnFlashAttentionVarLenScore: actualSeqQLenOptional and "
                "actualSeqKvLenOptional are required despite their names (the TND layout needs them), and "
                "realShiftOptional, dropMaskOptional, paddingMaskOptional, prefixOptional and keepProb < 1 are "
                "refused (161002); softmaxOutOut is never written (CANN reserves it).")


@spec.body
def _(b, query, key, value, real_shift, drop_mask, padding_mask, atten_mask, prefix, actual_seq_qlen,
      actual_seq_kvlen, scale_value, keep_prob, pre_tockens, next_tockens, head_num, input_layout, inner_precise,
      sparse_mode):
    G = N1 // N2
    bq, q0 = token_batches(b, actual_seq_qlen, T1, Bn)
    bk, k0 = token_batches(b, actual_seq_kvlen, T2, Bn)
    masked = bq.reshape([T1, 1]).ne(bk.reshape([1, T2]))                      # another batch's key
    if sparse_mode == 2 and atten_mask is not None:
        future = (b.iota(T2) - k0).reshape([1, T2]) > (b.iota(T1) - q0).reshape([T1, 1])
        masked = masked | future                                               # after the query, in its batch
    qg = query.permute(1, 0, 2).reshape([N2, G, T1, D])
    kg = key.permute(1, 0, 2).reshape([N2, 1, T2, D]).broadcast_to([N2, G, T2, D])
    vg = value.permute(1, 0, 2).reshape([N2, 1, T2, D]).broadcast_to([N2, G, T2, D])
    scores = b.matmul(qg, kg, transpose_b=True) * scale_value                  # [N2, G, T1, T2]
    scores = b.where(masked.reshape([1, 1, T1, T2]), -FLT_MAX, scores)
    m = scores.max(-1)
    e = b.exp(scores - m)
    lsum = e.sum(-1)
    p = b.quantize(e / lsum, T, "round")                                       # P cast to T for the cube
    out = b.matmul(p, vg).reshape([N1, T1, D]).permute(1, 0, 2).cast(T, "rint")   # Fixpipe rounds to nearest even

    def stat(x):   # [N2, G, T1] -> [T1, N1, 8]
        return x.reshape([N1, T1, 1]).permute(1, 0, 2).broadcast_to([T1, N1, 8])

    return {"softmax_max": stat(m), "softmax_sum": stat(lsum), "attention_out": out}


@spec.example
def _(rng, inputs, env, attrs):
    """Cumulative ends of Bn non-empty batches of random lengths (T1, T2 >= Bn)."""
    for name, total in (("actual_seq_qlen", env["T1"]), ("actual_seq_kvlen", env["T2"])):
        nb = env["Bn"]
        cuts = np.sort(rng.choice(np.arange(1, total), nb - 1, replace=False)) if nb > 1 else np.array([], int)
        inputs[name] = np.concatenate([cuts, [total]]).astype(np.int64)
