"""FlashAttentionScoreGrad (aclnnFlashAttentionScoreGrad), the backward of FlashAttentionScore
(examples/specs/flash_attention_score.py): dq, dk, dv of attention_out = softmax(mask(scale * Q Kᵀ)) V over every
key of the sequence (a dense key set), BNSD or BSND layout, GQA (N1 = G * N2), optional causal masking.

Facts (CANN's aclnnFlashAttentionScoreGrad document, ops-transformer attention/flash_attention_score_grad): the
inputs are query, key, value, dy (the gradient of attention_out, attention_out's shape), the optional atten_mask,
softmax_max and softmax_sum (fp32 [B, N1, S1, 8], the forward's outputs: 8 equal copies of each query row's max of
the scaled, masked scores and of its sum of exp(score - max)) and attention_in (the forward's attention_out); the
attributes scale_value, head_num, input_layout and sparse_mode mean what they mean in the forward; the outputs dq,
dk, dv have the shapes and dtype of query, key, value. sparse_mode 2 is leftUpCausal (query row s sees keys
0 .. s), 3 rightDownCausal (keys 0 .. s + S2 - S1); both take atten_mask only for its presence.

The backward (FlashAttention-2's, which CANN's kernel computes per query block from the saved statistics; the
softmax is not recomputed, its max and sum are read):
    S   = mask(scale * Q Kᵀ)                    [B, N2, G, S1, S2]   (masked scores -FLT_MAX, as the forward)
    P   = exp(S - softmax_max) / softmax_sum    (0 where masked)
    D_r = rowsum(dy * attention_in)             [B, N2, G, S1, 1]    (= rowsum(P * dP): out = P V)
    dP  = dy Vᵀ
    dS  = P * (dP - D_r) * scale
    dq  = dS K,   dk = sum over the group G of dSᵀ Q,   dv = sum over the group G of Pᵀ dy.
The scale is folded into dq and dk after their matmuls (the cube reads dS = P (dP - D_r) rounded to T, as P; the
fp32 products are scaled, then rounded to T to nearest even by Fixpipe), as NsaSelectedAttentionGrad
(specs/nsa_selected_attention_grad.py) does for a selected key set.

The subset this spec supports (everything else is refused with a message, or not declared):
  * input_layout "BNSD" (query / dy / attention_in / dq [B, N1, S1, D], key / value / dk / dv [B, N2, S2, D]) or
    "BSND" ([B, S1, N1, D], [B, S2, N2, D]); not BSH, SBH, TND; fp16 and bf16; D a multiple of 16 (the cube's
    fractal); softmax_max / softmax_sum fp32 [B, N1, S1, 8] in both layouts;
  * sparse_mode 0 without atten_mask, 2 or 3 with atten_mask (causal: the mask's values are never read), S1 <= S2
    under sparse_mode 3 (as the forward spec: CANN's invalid rows are not modelled); an explicit mask is refused;
  * the parameters keep CANN's order (query, keyIn, value, dy, ..., attenMaskOptional, softmaxMaxOptional,
    softmaxSumOptional, softmaxInOptional, attentionInOptional; dqOut, dkOut, dvOut) in the forward spec's
    snake_case names (keyIn is key, attenMaskOptional atten_mask, attentionInOptional attention_in);
  * no dropout, pse, padding mask, prefix, softmax_in (not declared); dpse is not produced; pre_tokens /
    next_tokens / keep_prob / inner_precise are not declared; the parameter list is a subset of CANN's.

Rounding: P and dS are rounded to T before the cube's matmuls (2-byte operands), dq / dk / dv rounded to nearest
even once at the end; the tests (tests/test_flash_attention_grad.py) bound the interpreted spec and the emitted
kernel (emulated, and its Kernel IR interpreted) against float64 torch autograd of the forward by a few u_T of the
terms each gradient element sums (u_T = 2^-11 fp16, 2^-8 bf16). The kernel is the attention family's backward over
a dense key set (docs/design.md "Kernel families", attention): units of (batch, kv head, block of query rows,
group of heads), P recomputed per key chunk from the saved max / sum, dq accumulated on the cube, dk / dv added
at each chunk's key rows of fp32 workspaces, every gradient scaled and cast by a final pass.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, boolean, f16, f32, u8

FLT_MAX = 3.4028234663852886e38

spec = OpSpec("FlashAttentionScoreGrad", aclnn="aclnnFlashAttentionScoreGrad", socs=(A2, A3), round="round",
              doc="Dense attention backward (FlashAttention): dq, dk, dv from the saved softmax max / sum, BNSD or "
                  "BSND, GQA, optional causal mask.",
              source="CANN's aclnnFlashAttentionScoreGrad document (ops-transformer "
                     "attention/flash_attention_score_grad)")
B, N2, S1 = spec.dims("B N2 S1")
S2 = spec.dim("S2")
N1 = spec.dim("N1")
D = spec.dim("D", max=512, multiple_of=16)
MS1, MS2 = spec.dims("MS1 MS2")
T, M = spec.dtype_vars("T M")

Q_FORMS = {"BNSD": [B, N1, S1, D], "BSND": [B, S1, N1, D]}
KV_FORMS = {"BNSD": [B, N2, S2, D], "BSND": [B, S2, N2, D]}

spec.attr("input_layout", str, None, choices=("BNSD", "BSND"), static=True, required=True,
          doc="how query, key, value, dy, attention_in and the gradients are stored: BNSD [B, N, S, D] or BSND "
              "[B, S, N, D]")
spec.input("query", T, Q_FORMS, form_by="input_layout")
spec.input("key", T, KV_FORMS, form_by="input_layout")
spec.input("value", T, KV_FORMS, form_by="input_layout")
spec.input("dy", T, Q_FORMS, form_by="input_layout", doc="the gradient of the forward's attention_out")
spec.input("atten_mask", M, [MS1, MS2], optional=True,
           doc="values never read: its presence with sparse_mode 2 or 3 selects causal masking")
spec.input("softmax_max", f32, [B, N1, S1, 8], doc="the forward's row max of the scaled, masked scores (8 copies)")
spec.input("softmax_sum", f32, [B, N1, S1, 8], doc="the forward's row sum of exp(score - max) (8 copies)")
spec.input("attention_in", T, Q_FORMS, form_by="input_layout", doc="the forward's attention_out")

spec.attr("scale_value", float, 1.0)
spec.attr("head_num", int, 1, dim=N1, doc="the query's heads N1: must equal query.shape[1] (BNSD), [2] (BSND)")
spec.attr("sparse_mode", int, 0, choices=(0, 2, 3), static=True,
          doc="0: no mask; 2: leftUpCausal, 3: rightDownCausal (both need atten_mask)")

spec.output("dq", T, Q_FORMS, form_by="input_layout")
spec.output("dk", T, KV_FORMS, form_by="input_layout")
spec.output("dv", T, KV_FORMS, form_by="input_layout")

spec.dtypes((T, M), [(f16, boolean), (f16, u8), (bf16, boolean), (bf16, u8)])

spec.require((N1 % N2).eq(0), "query", "query heads N1 must be a multiple of the kv heads N2 (GQA)")
spec.require(S1 <= S2, "query", "{sparse_mode} 3 (rightDownCausal) needs at most as many query rows as keys (S1 <= "
             "S2): CANN's invalid rows (a query row that sees no key) are not modelled",
             when=lambda a, pr: a["sparse_mode"] == 3)
spec.check("atten_mask", lambda a, pr: None if not (a["sparse_mode"] == 0 and pr["atten_mask"]) else
           "an explicit mask ({sparse_mode} 0 with {atten_mask}) is not supported; "
           "use {sparse_mode} 2 or 3 for causal masking")
spec.check("atten_mask", lambda a, pr: None if not (a["sparse_mode"] in (2, 3) and not pr["atten_mask"]) else
           "{sparse_mode} 2 (leftUpCausal) and 3 (rightDownCausal) need the {atten_mask} tensor")

spec.package("ops-transformer", "attention")
spec.example_call({"B": 1, "N1": 2, "N2": 1, "S1": 5, "S2": 37, "D": 16})


@spec.body
def _(b, query, key, value, dy, atten_mask, softmax_max, softmax_sum, attention_in, scale_value, head_num,
      input_layout, sparse_mode):
    G = N1 // N2
    if input_layout == "BSND":   # stored [B, S, N, D]: the same backward on the BNSD view
        query, key, value, dy, attention_in = (x.permute(0, 2, 1, 3)
                                               for x in (query, key, value, dy, attention_in))
    qg = query.reshape([B, N2, G, S1, D])
    dyg = dy.reshape([B, N2, G, S1, D])
    og = attention_in.reshape([B, N2, G, S1, D])
    kg = key.reshape([B, N2, 1, S2, D]).broadcast_to([B, N2, G, S2, D])
    vg = value.reshape([B, N2, 1, S2, D]).broadcast_to([B, N2, G, S2, D])
    scores = b.matmul(qg, kg, transpose_b=True) * scale_value                    # [B, N2, G, S1, S2]
    if sparse_mode in (2, 3) and atten_mask is not None:
        row = b.iota(S1) if sparse_mode == 2 else b.iota(S1) + (S2 - S1)       # rightDown: the last rows align
        future = b.iota(S2).reshape([1, S2]) > row.reshape([S1, 1])             # key after the query row
        scores = b.where(future.reshape([1, 1, 1, S1, S2]), -FLT_MAX, scores)
    m = softmax_max.slice(-1, 0, 1).reshape([B, N2, G, S1, 1])
    lsum = softmax_sum.slice(-1, 0, 1).reshape([B, N2, G, S1, 1])
    p = b.exp(scores - m) / lsum                                               # P recomputed, fp32
    dp = b.matmul(dyg, vg, transpose_b=True)                                   # [B, N2, G, S1, S2]
    dr = (dyg * og).sum(-1)                                                    # D_r [B, N2, G, S1, 1]
    ds = b.quantize(p * (dp - dr), T, "round")                                 # dS / scale, T for the cube
    p = b.quantize(p, T, "round")                                              # P, T for the cube
    dq = b.matmul(ds, kg).reshape([B, N1, S1, D]) * scale_value
    dk = (b.matmul(ds, qg, transpose_a=True).sum(2, keepdims=False) * scale_value)   # [B, N2, S2, D]
    dv = b.matmul(p, dyg, transpose_a=True).sum(2, keepdims=False)                  # [B, N2, S2, D]
    if input_layout == "BSND":
        dq, dk, dv = (x.permute(0, 2, 1, 3) for x in (dq, dk, dv))
    return {"dq": dq.cast(T, "rint"), "dk": dk.cast(T, "rint"), "dv": dv.cast(T, "rint")}


@spec.example
def _(rng, inputs, env, attrs):
    """softmax_max, softmax_sum and attention_in consistent with query, key, value: the forward in float64 (the
    statistics fp32, attention_in rounded to T), so `opgen check --dims` runs the backward on a real forward."""
    import numpy as np

    lay = attrs["input_layout"]
    q, k, v = (np.asarray(inputs[n], np.float64) for n in ("query", "key", "value"))
    if lay == "BSND":
        q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
    n1, s1, n2, s2 = q.shape[1], q.shape[2], k.shape[1], k.shape[2]
    kk, vv = (np.repeat(x, n1 // n2, axis=1) for x in (k, v))
    s = q @ kk.transpose(0, 1, 3, 2) * attrs["scale_value"]
    if attrs["sparse_mode"] in (2, 3) and inputs.get("atten_mask") is not None:
        shift = 0 if attrs["sparse_mode"] == 2 else s2 - s1
        s = np.where(np.arange(s2)[None, :] > np.arange(s1)[:, None] + shift, -FLT_MAX, s)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    lsum = e.sum(-1, keepdims=True)
    out = (e / lsum) @ vv
    if lay == "BSND":
        out = out.transpose(0, 2, 1, 3)
    inputs["softmax_max"] = np.repeat(m, 8, -1).astype(np.float32)
    inputs["softmax_sum"] = np.repeat(lsum, 8, -1).astype(np.float32)
    inputs["attention_in"] = out.astype(inputs["query"].dtype)
