"""NsaSelectedAttention (aclnnNsaSelectedAttention): attention of each query token over the key
blocks its kv head selected (topk_indices), TND layout, GQA.

Facts: docs/reference/nsa_selected_attention.md §1.1 (parameters, OpDef names, dtypes, defaults),
§1.3 (cumulative actual_seq arrays), §2.1 (per (token, kv head) unit; the G query heads share the
kv head's selection), §2.2 (gather in topk order, duplicates count twice), §2.3 (masking only when a
mask tensor is given and sparse_mode == 2; mask values are never read; -FLT_MAX before scaling),
§2.4 (forward, P rounded to T with CAST_ROUND, stats [T1, N1, 8] as 8 equal copies), §3.1-3.2 checks.
Stricter than CANN (§3.2 "not enforced"): N1 % N2 == 0, head_num == N1, D and Dv multiples of 16,
T1 == cu_q[-1], T2 == cu_kv[-1], increasing cumulative ends, every block inside its batch.
"""

from _nsa_common import FLT_MAX, cann_gm_bytes, declare_checks, gather_rows, selected_positions, token_layout

from opgen.dsl import A2, A3, OpSpec, api, bf16, boolean, f16, f32, i32, i64, u8

spec = OpSpec("NsaSelectedAttention", aclnn="aclnnNsaSelectedAttention", socs=(A2, A3), round="round",
              doc="Selected-block sparse attention of Native Sparse Attention (forward).",
              source="CANN's aclnnNsaSelectedAttention document (ops-transformer attention/nsa_selected_attention)")
T1, T2, N2 = spec.dims("T1 T2 N2")
Bn = spec.dim("Bn", max=1024)
N1 = spec.dim("N1")
D = spec.dim("D", max=768, multiple_of=16)
Dv = spec.dim("Dv", max=768, multiple_of=16)
CNT = spec.dim("CNT", max=32)
BS = spec.dim("BS", min=16, max=128, multiple_of=16)
MS1, MS2 = spec.dims("MS1 MS2")
T, M = spec.dtype_vars("T M")

spec.input("query", T, [T1, N1, D])
spec.input("key", T, [T2, N2, D])
spec.input("value", T, [T2, N2, Dv])
spec.input("topk_indices", i32, [T1, N2, CNT], doc="selected block per (token, kv head), relative to the batch")
spec.input("atten_mask", M, [MS1, MS2], optional=True, doc="values never read; presence + sparse_mode 2 = causal")
spec.input("actual_seq_qlen", i64, [Bn], optional=True, host=True, doc="cumulative query ends (required)")
spec.input("actual_seq_kvlen", i64, [Bn], optional=True, host=True, doc="cumulative kv ends (required)")

spec.attr("scale_value", float, 1.0)
spec.attr("head_num", int, 1, dim=N1, doc="must equal query.shape[1]")
spec.attr("sparse_mode", int, 0, choices=(0, 2), static=True, doc="2: causal within each batch")
spec.attr("input_layout", str, None, choices=("TND",), static=True, required=True)
spec.attr("selected_block_size", int, 64, dim=BS, attr_type="REQUIRED")   # CANN: REQUIRED with a default
spec.attr("selected_block_count", int, 16, dim=CNT, attr_type="REQUIRED")

spec.output("softmax_max", f32, [T1, N1, 8])
spec.output("softmax_sum", f32, [T1, N1, 8])
spec.output("attention_out", T, [T1, N1, Dv])

spec.dtypes((T, M), [(f16, boolean), (f16, u8), (bf16, boolean), (bf16, u8)])

declare_checks(spec, (N1, N2, D, Dv, CNT, BS),
               ("value", "topk_indices", "actual_seq_qlen", "actual_seq_kvlen", "selected_block_size", "sparse_mode"),
               lambda a, arr: a["sparse_mode"] == 2 and arr["atten_mask"] is not None)


spec.package("ops-transformer", "attention")  # docs/reference/ops_package.md §1: ops-transformer attention/nsa_selected_attention
spec.example_call({"T1": 4, "T2": 64, "N1": 2, "N2": 1, "D": 16, "Dv": 16, "CNT": 2, "BS": 16, "Bn": 2})
# CANN's public signature (docs/reference/nsa_selected_attention.md §1.1): camelCase names, inputLayout before sparseMode,
# const output tensors.
spec.aclnn_signature(
    api.param("query"), api.param("key"), api.param("value"), api.param("topkIndices", "topk_indices"),
    api.param("attenMaskOptional", "atten_mask"), api.param("actualSeqQLenOptional", "actual_seq_qlen"),
    api.param("actualSeqKvLenOptional", "actual_seq_kvlen"), api.param("scaleValue", "scale_value"),
    api.param("headNum", "head_num"), api.param("inputLayout", "input_layout", ctype="char*"),
    api.param("sparseMode", "sparse_mode"), api.param("selectedBlockSize", "selected_block_size"),
    api.param("selectedBlockCount", "selected_block_count"), api.param("softmaxMaxOut", "softmax_max"),
    api.param("softmaxSumOut", "softmax_sum"), api.param("attentionOut", "attention_out"),
    const_outputs=True)
spec.aclnn_note("Stricter than CANN's aclnnNsaSelectedAttention: actualSeqQLenOptional and "
                "actualSeqKvLenOptional are required despite their names (CANN fails later, with 561103), and "
                "the rules listed in the spec's docstring are checked here rather than left to the kernel.")

@spec.gm_reference
def _(dims, t_bytes, deterministic):
    """The reference's estimate of CANN's kernel (docs/reference/nsa_selected_attention.md §4)."""
    return cann_gm_bytes(False, dims, t_bytes, deterministic)


@spec.body
def _(b, query, key, value, topk_indices, atten_mask, actual_seq_qlen, actual_seq_kvlen, scale_value, head_num,
      sparse_mode, input_layout, selected_block_size, selected_block_count):
    G = N1 // N2
    L = CNT * BS
    s, kv0 = token_layout(b, actual_seq_qlen, actual_seq_kvlen, T1, Bn)
    pos = selected_positions(b, topk_indices, T1, N2, CNT, BS)                 # [T1, N2, L]
    rows = pos + kv0.reshape([T1, 1, 1])
    ksel = gather_rows(b, key, rows)                                           # [T1, N2, L, D]
    vsel = gather_rows(b, value, rows)                                         # [T1, N2, L, Dv]
    qg = query.reshape([T1, N2, G, D])
    scores = b.matmul(qg, ksel, transpose_b=True)                              # [T1, N2, G, L]
    if sparse_mode == 2 and atten_mask is not None:
        future = (pos > s.reshape([T1, 1, 1])).reshape([T1, N2, 1, L])
        scores = b.where(future, -FLT_MAX, scores)                            # masked before scaling
    scores = scores * scale_value
    m = scores.max(-1)
    e = b.exp(scores - m)
    lsum = e.sum(-1)
    p = b.quantize(e / lsum, T, "round")                                       # P cast to T for the cube
    # O leaves the cube through Fixpipe (fp32 -> T, round to nearest even: docs/reference/ascendc.md §2.4 "written directly as
    # fp16/bf16 by fixpipe"), not through a vector Cast: rint here, not the op's CAST_ROUND.
    out = b.matmul(p, vsel).reshape([T1, N1, Dv]).cast(T, "rint")
    return {
        "softmax_max": m.reshape([T1, N1, 1]).broadcast_to([T1, N1, 8]),
        "softmax_sum": lsum.reshape([T1, N1, 1]).broadcast_to([T1, N1, 8]),
        "attention_out": out,
    }


@spec.example
def _(rng, inputs, env, attrs):
    from _nsa_common import make_layout

    make_layout(rng, inputs, env, env["BS"], attrs["sparse_mode"] == 2,
                ("topk_indices", "actual_seq_qlen", "actual_seq_kvlen"))
