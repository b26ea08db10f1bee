"""NsaSelectedAttentionGrad (aclnnNsaSelectedAttentionGrad): dq, dk, dv of selected attention.

Facts: docs/reference/nsa_selected_attention.md §1.2 (parameters, OpDef names as spelled by CANN incl.
`actualSeqKVLlen` and `attenMsk`), §2.5 (backward: P from the saved max/sum, Dr = rowsum(dO * O),
dS = P * (dP - Dr), P and dS rounded to T with CAST_ROUND, dq/dk scaled at the end, dk/dv scattered
to the selected rows with duplicates accumulating), §2.6-2.7 (value-based causal masking after
scaling; the device kernels agree only inside the consistency domain), §3.3-3.4 checks.
Stricter than CANN: headNum == N1, N1 % N2 == 0, increasing cumulative ends equal to T1/T2,
topk indices inside their batch, no fully masked rows under sparseMode 2.
"""

from _nsa_common import FLT_MAX, cann_gm_bytes, declare_checks, gather_rows, scatter_rows, selected_positions, token_layout

from opgen.dsl import A2, A3, OpSpec, api, bf16, boolean, f16, f32, i32, i64

spec = OpSpec("NsaSelectedAttentionGrad", aclnn="aclnnNsaSelectedAttentionGrad", socs=(A2, A3), round="round",
              doc="Backward of NsaSelectedAttention (TND, GQA).",
              source="CANN's aclnnNsaSelectedAttentionGrad document (ops-transformer attention/nsa_selected_attention_grad)")
T1, T2, N2, Bn = spec.dims("T1 T2 N2 Bn")
N1 = spec.dim("N1")
D = spec.dim("D", max=768, multiple_of=16)
Dv = spec.dim("Dv", max=768, multiple_of=16)
CNT = spec.dim("CNT", max=128)
BS = spec.dim("BS", min=16, max=128, multiple_of=16)
MS1, MS2 = spec.dims("MS1 MS2")
T, = spec.dtype_vars("T")

spec.input("query", T, [T1, N1, D])
spec.input("key", T, [T2, N2, D])
spec.input("value", T, [T2, N2, Dv])
spec.input("attentionOut", T, [T1, N1, Dv], doc="forward O")
spec.input("attentionOutGrad", T, [T1, N1, Dv], doc="dO")
spec.input("softmaxMax", f32, [T1, N1, 8], doc="forward row max (8 equal copies)")
spec.input("softmaxSum", f32, [T1, N1, 8], doc="forward row sum (8 equal copies)")
spec.input("topkIndices", i32, [T1, N2, CNT])
spec.input("actualSeqQLen", i64, [Bn], optional=True, host=True, doc="cumulative query ends (required)")
spec.input("actualSeqKVLlen", i64, [Bn], optional=True, host=True, doc="cumulative kv ends (required)")
spec.input("attenMsk", boolean, [MS1, MS2], optional=True, when=lambda a, pr: False, doc="never read")

spec.attr("scaleValue", float, 1.0, attr_type="REQUIRED")   # CANN's def: REQUIRED with defaults (§1.2)
spec.attr("selectedBlockCount", int, 1, dim=CNT, attr_type="REQUIRED")
spec.attr("selectedBlockSize", int, 1, dim=BS, attr_type="REQUIRED")
spec.attr("headNum", int, 1, dim=N1, doc="must equal query.shape[1]", attr_type="REQUIRED")
spec.attr("inputLayout", str, "TND", choices=("TND",), static=True, attr_type="REQUIRED")
spec.attr("sparseMode", int, 0, choices=(0, 2), static=True, doc="2: causal within each batch")

spec.output("dq", T, [T1, N1, D])
spec.output("dk", T, [T2, N2, D])
spec.output("dv", T, [T2, N2, Dv])

spec.dtypes((T,), [(f16,), (bf16,)])

declare_checks(spec, (N1, N2, D, Dv, CNT, BS),
               ("value", "topkIndices", "actualSeqQLen", "actualSeqKVLlen", "selectedBlockSize", "sparseMode"),
               lambda a, arr: a["sparseMode"] == 2)


spec.package("ops-transformer", "attention")  # docs/reference/ops_package.md §1: ops-transformer attention/nsa_selected_attention_grad
spec.example_call({"T1": 4, "T2": 64, "N1": 2, "N2": 1, "D": 16, "Dv": 16, "CNT": 2, "BS": 16, "Bn": 2})
# CANN's public signature (docs/reference/nsa_selected_attention.md §1.2): selectedBlockSize before selectedBlockCount
# (both int64: the OpDef order would swap them silently), headNum after them, const output tensors.
spec.aclnn_signature(
    api.param("query"), api.param("key"), api.param("value"), api.param("attentionOut"),
    api.param("attentionOutGrad"), api.param("softmaxMax"), api.param("softmaxSum"), api.param("topkIndices"),
    api.param("actualSeqQLenOptional", "actualSeqQLen"), api.param("actualSeqKvLenOptional", "actualSeqKVLlen"),
    api.param("attenMaskOptional", "attenMsk"), api.param("scaleValue"), api.param("selectedBlockSize"),
    api.param("selectedBlockCount"), api.param("headNum"), api.param("inputLayout", ctype="char*"),
    api.param("sparseMode"), api.param("dqOut", "dq"), api.param("dkOut", "dk"), api.param("dvOut", "dv"),
    const_outputs=True)
spec.aclnn_note("Stricter than CANN's aclnnNsaSelectedAttentionGrad: actualSeqQLenOptional and "
                "actualSeqKvLenOptional are required despite their names, and the rules listed in the spec's "
                "docstring are checked here.")

@spec.gm_reference
def _(dims, t_bytes, deterministic):
    """The reference's estimate of CANN's kernel (docs/reference/nsa_selected_attention.md §4)."""
    return cann_gm_bytes(True, dims, t_bytes, deterministic)


@spec.body
def _(b, query, key, value, attentionOut, attentionOutGrad, softmaxMax, softmaxSum, topkIndices, actualSeqQLen,
      actualSeqKVLlen, attenMsk, scaleValue, selectedBlockCount, selectedBlockSize, headNum, inputLayout,
      sparseMode):
    G = N1 // N2
    L = CNT * BS
    s, kv0 = token_layout(b, actualSeqQLen, actualSeqKVLlen, T1, Bn)
    pos = selected_positions(b, topkIndices, T1, N2, CNT, BS)
    rows = pos + kv0.reshape([T1, 1, 1])
    ksel = gather_rows(b, key, rows)                                           # [T1, N2, L, D]
    vsel = gather_rows(b, value, rows)                                         # [T1, N2, L, Dv]
    qg = query.reshape([T1, N2, G, D])
    og = attentionOut.reshape([T1, N2, G, Dv])
    dog = attentionOutGrad.reshape([T1, N2, G, Dv])
    scores = b.matmul(qg, ksel, transpose_b=True) * scaleValue
    if sparseMode == 2:
        future = (pos > s.reshape([T1, 1, 1])).reshape([T1, N2, 1, L])
        scores = b.where(future, -FLT_MAX, scores)                            # masked after scaling
    m = softmaxMax.slice(-1, 0, 1).reshape([T1, N2, G, 1])
    lsum = softmaxSum.slice(-1, 0, 1).reshape([T1, N2, G, 1])
    p = b.exp(scores - m) / lsum
    dp = b.matmul(dog, vsel, transpose_b=True)                                 # [T1, N2, G, L]
    dr = (dog * og).sum(-1)
    ds = b.quantize(p * (dp - dr), T, "round")
    p = b.quantize(p, T, "round")
    dq = b.matmul(ds, ksel).reshape([T1, N1, D]) * scaleValue
    dk = scatter_rows(b, b.matmul(ds, qg, transpose_a=True), rows, T2) * scaleValue
    dv = scatter_rows(b, b.matmul(p, dog, transpose_a=True), rows, T2)
    return {"dq": dq, "dk": dk, "dv": dv}


@spec.example
def _(rng, inputs, env, attrs):
    """Legal layout, then attentionOut and the softmax statistics from the forward spec."""
    from _nsa_common import make_layout

    from opgen.errors import ValidationError
    from opgen.interp import interpret

    make_layout(rng, inputs, env, env["BS"], attrs["sparseMode"] == 2,
                ("topkIndices", "actualSeqQLen", "actualSeqKVLlen"))
    try:
        fwd = _forward(interpret, inputs, env, attrs)
    except ValidationError as e:   # name this op's parameters, not the forward's
        raise ValidationError(_FORWARD_NAMES.get(e.param, e.param),
                              f"{_grad_names(e.rule)} (a rule of NsaSelectedAttention, which --dims runs to make "
                              f"attentionOut, softmaxMax and softmaxSum; give those in --inputs instead)") from None
    inputs["attentionOut"] = fwd["attention_out"]
    inputs["softmaxMax"] = fwd["softmax_max"]
    inputs["softmaxSum"] = fwd["softmax_sum"]


_FORWARD_NAMES = {"topk_indices": "topkIndices", "actual_seq_qlen": "actualSeqQLen",
                  "actual_seq_kvlen": "actualSeqKVLlen", "atten_mask": "attenMsk", "scale_value": "scaleValue",
                  "head_num": "headNum", "sparse_mode": "sparseMode", "input_layout": "inputLayout",
                  "selected_block_size": "selectedBlockSize", "selected_block_count": "selectedBlockCount"}
"""NsaSelectedAttention's parameter names -> this op's (the example runs the forward to make its inputs)."""


def _grad_names(text: str) -> str:
    """`text` with the forward's parameter names replaced by this op's."""
    import re

    return re.sub(r"\b(" + "|".join(_FORWARD_NAMES) + r")\b", lambda m: _FORWARD_NAMES[m.group(1)], text)


def _forward(interpret, inputs, env, attrs):
    """The forward's outputs for the example's inputs (attentionOut and the softmax statistics)."""
    import numpy as np

    return interpret("NsaSelectedAttention", {
        "query": inputs["query"], "key": inputs["key"], "value": inputs["value"],
        "topk_indices": inputs["topkIndices"], "actual_seq_qlen": inputs["actualSeqQLen"],
        "actual_seq_kvlen": inputs["actualSeqKVLlen"],
        "atten_mask": np.ones((1, 1), np.bool_) if attrs["sparseMode"] == 2 else None,
    }, {"scale_value": attrs["scaleValue"], "head_num": inputs["query"].shape[1], "sparse_mode": attrs["sparseMode"],
        "input_layout": "TND", "selected_block_size": env["BS"],
        "selected_block_count": inputs["topkIndices"].shape[2]}, {"T": inputs["query"].dtype.name})
