"""FlashAttentionScore (aclnnFlashAttentionScore), forward: attention_out = softmax(mask(scale * Q Kᵀ)) V over
every key of the sequence (a dense key set), BNSD, BSND or BSH layout, GQA (N1 = G * N2), optional causal masking.

Facts (CANN's aclnnFlashAttentionScore document): query [B, N1, S1, D], key / value [B, N2, S2, D] in the BNSD
layout; the scale is applied before the mask; softmax_max and softmax_sum are fp32 [B, N1, S1, 8] (8 equal
copies of the row's max of the scaled, masked scores and of its sum of exp(score - max)); sparse_mode 2 is
leftUpCausal (query row s sees keys 0 .. s), sparse_mode 3 rightDownCausal (keys 0 .. s + S2 - S1); both take the
atten_mask tensor only for its presence. A query row that sees no key (S1 > S2 under sparse_mode 3) is an "invalid
row" to CANN: its kernel then runs the invalid-line mode (op_host flash_attention_score_tiling_general.cpp
EnableBandInvalidLineImplMode; op_kernel flash_attention_score_s1s2_bn2gs1.h InvalidLineSplitS2Process), which sets
the row's P to 0 where its max is -FLT_MAX (AdjustSoftMaxRes), so attention_out is 0 there, softmax_max -FLT_MAX and
softmax_sum FLT_MAX (0x7F7FFFFF). This spec refuses S1 > S2 under sparse_mode 3 rather than model it (the VarLen
documents likewise require Sq <= Skv for sparse_mode 3).

The subset this spec supports (everything else is refused with a message, or not declared):
  * input_layout "BNSD", "BSND" (query [B, S1, N1, D], key / value [B, S2, N2, D], attention_out
    [B, S1, N1, D]) or "BSH" (query [B, S1, H1], key / value [B, S2, H2] with H1 = N1 * D, H2 = N2 * D: N1 is
    head_num, D = H1 / N1, N2 = H2 / D; attention_out [B, S1, H1]; the bytes of BSND); softmax_max /
    softmax_sum stay [B, N1, S1, 8]; not SBH, TND; fp16 and bf16; D a multiple of 16 (the cube's fractal);
  * sparse_mode 0 without atten_mask (no masking), 2 or 3 with atten_mask (causal: the mask's values are never
    read); an explicit mask (sparse_mode 0 with a mask) is refused here (the attention family lowers a bool mask
    input of exactly [S1, S2], but this spec's mask is CANN's [MS1, MS2] of bool or uint8), other sparse modes are
    not among the choices;
  * no dropout (keep_prob is not declared: 1), no pse / drop mask / padding mask / prefix inputs (not
    declared); pre_tokens and next_tokens are not declared (sparse modes 0 and 2 do not read them);
  * softmax_out is not produced (CANN returns it empty as well);
  * the parameter list is therefore a subset of CANN's (realShiftOptional, dropMaskOptional, paddingMaskOptional,
    prefixOptional, keepProb, preTokens, nextTokens, innerPrecise and softmaxOutOut are left out).
P = softmax(...) is rounded to the data type before P V (the cube reads 2-byte operands); attention_out is rounded
to nearest even (rint).

The attention family lowers it as a dense key set (docs/design.md "Kernel families"): units of (batch, kv head, S1
block, head group) over the AI Cores, the keys in chunks with an online softmax (per row a running max m and sum l,
an fp32 output accumulator rescaled by exp(m_old - m) at each chunk, divided by l after the last chunk; CANN's
kernel does the same), fully masked key chunks skipped under causal masking. No S2 limit: the UB and the GM
workspace hold one key chunk, not a score row.

Rounding of P, the spec against the kernel: this spec rounds the normalised P = exp(S - m) / l to T (m, l the whole
row's max and sum), the kernel rounds the unnormalised exp(S - m_c) to T (m_c the running max after chunk c) and
divides the fp32 sum by l at the end (the later rescales exp(m_c - m) are fp32). Both put one relative rounding
error <= u_T on each term P_j V_j (on different values) and round the output once, so each is within
2 u_T sum_j P_j |V_j| (plus fp32 terms) of the exact output and the two differ by at most twice that; the tests
bound the kernel against float64 math by 4 u_T sum_j P_j |V_j| (tests/test_flash_attention.py, independent of the
spec's rounding and the kernel's), and `opgen check` judges attention_out by the rounded-intermediate rule
(opgen/check/compare.py).
Measured (`opgen check --json`, B 1, N 4, S 1024, D 128 bf16): GM 10.4x the minimum causal, 17.5x not (9.0x and
15.6x with whole score rows: the online softmax adds each 512-key block's fp32 P V tile to the S / P tiles that
cross the GM workspace between the cube and the vector cores; K / V are read once per S1 block of a unit); the
workspace does not depend on S2: 27.8 MB here (54.5 MB with whole rows), 20.4 MB at S1 = 256, S2 = 8192 (115.9 MB
with whole rows).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, boolean, f16, f32, u8

FLT_MAX = 3.4028234663852886e38

spec = OpSpec("FlashAttentionScore", aclnn="aclnnFlashAttentionScore", socs=(A2, A3), round="round",
              doc="Dense attention forward (FlashAttention), BNSD, BSND or BSH, GQA, optional causal mask.",
              source="CANN's aclnnFlashAttentionScore document (ops-transformer attention/flash_attention_score)")
B, N2, S1 = spec.dims("B N2 S1")
S2 = spec.dim("S2")
N1 = spec.dim("N1")
D = spec.dim("D", max=512, multiple_of=16)
MS1, MS2 = spec.dims("MS1 MS2")
T, M = spec.dtype_vars("T M")

spec.attr("input_layout", str, None, choices=("BNSD", "BSND", "BSH"), static=True, required=True,
          doc="how query, key, value and attention_out are stored: BNSD [B, N, S, D], BSND [B, S, N, D] or BSH "
               "[B, S, N * D] (H = N * D, N the head_num of the query)")
spec.input("query", T, {"BNSD": [B, N1, S1, D], "BSND": [B, S1, N1, D], "BSH": [B, S1, N1 * D]},
           form_by="input_layout")
spec.input("key", T, {"BNSD": [B, N2, S2, D], "BSND": [B, S2, N2, D], "BSH": [B, S2, N2 * D]},
           form_by="input_layout")
spec.input("value", T, {"BNSD": [B, N2, S2, D], "BSND": [B, S2, N2, D], "BSH": [B, S2, N2 * D]},
           form_by="input_layout")
spec.input("atten_mask", M, [MS1, MS2], optional=True,
           doc="values never read: its presence with sparse_mode 2 selects causal masking")

spec.attr("scale_value", float, 1.0)
spec.attr("head_num", int, 1, dim=N1, doc="the query's heads N1: must equal query.shape[1] (BNSD), [2] (BSND); "
          "divides query.shape[2] = N1 * D (BSH)")
spec.attr("sparse_mode", int, 0, choices=(0, 2, 3), static=True,
          doc="0: no mask; 2: leftUpCausal, 3: rightDownCausal (both need atten_mask)")

spec.output("softmax_max", f32, [B, N1, S1, 8])
spec.output("softmax_sum", f32, [B, N1, S1, 8])
spec.output("attention_out", T, {"BNSD": [B, N1, S1, D], "BSND": [B, S1, N1, D], "BSH": [B, S1, N1 * D]},
            form_by="input_layout")

spec.dtypes((T, M), [(f16, boolean), (f16, u8), (bf16, boolean), (bf16, u8)])

spec.require((N1 % N2).eq(0), "query", "query heads N1 must be a multiple of the kv heads N2 (GQA)")
spec.require(S1 <= S2, "query", "{sparse_mode} 3 (rightDownCausal) needs at most as many query rows as keys (S1 <= "
             "S2): CANN zeroes a query row that sees no key (its max -FLT_MAX, its sum FLT_MAX), which this "
             "spec does not model", when=lambda a, pr: a["sparse_mode"] == 3)
spec.check("atten_mask", lambda a, pr: None if not (a["sparse_mode"] == 0 and pr["atten_mask"]) else
           "an explicit mask ({sparse_mode} 0 with {atten_mask}) is not supported; "
           "use {sparse_mode} 2 for causal masking")
spec.check("atten_mask", lambda a, pr: None if not (a["sparse_mode"] in (2, 3) and not pr["atten_mask"]) else
           "{sparse_mode} 2 (leftUpCausal) and 3 (rightDownCausal) need the {atten_mask} tensor")

spec.package("ops-transformer", "attention")
spec.example_call({"B": 1, "N1": 2, "N2": 1, "S1": 5, "S2": 37, "D": 16})


@spec.body
def _(b, query, key, value, atten_mask, scale_value, head_num, input_layout, sparse_mode):
    G = N1 // N2
    if input_layout == "BSH":    # stored [B, S, N * D]: the bytes of BSND
        query = query.reshape([B, S1, N1, D])
        key, value = (x.reshape([B, S2, N2, D]) for x in (key, value))
    if input_layout in ("BSND", "BSH"):   # stored [B, S, N, D]: the same attention on the BNSD view
        query, key, value = (x.permute(0, 2, 1, 3) for x in (query, key, value))
    qg = query.reshape([B, N2, G, S1, D])
    kg = key.reshape([B, N2, 1, S2, D]).broadcast_to([B, N2, G, S2, D])
    vg = value.reshape([B, N2, 1, S2, D]).broadcast_to([B, N2, G, S2, D])
    scores = b.matmul(qg, kg, transpose_b=True) * scale_value                    # [B, N2, G, S1, S2]
    if sparse_mode in (2, 3) and atten_mask is not None:
        row = b.iota(S1) if sparse_mode == 2 else b.iota(S1) + (S2 - S1)       # rightDown: the last rows align
        future = b.iota(S2).reshape([1, S2]) > row.reshape([S1, 1])             # key after the query row
        scores = b.where(future.reshape([1, 1, 1, S1, S2]), -FLT_MAX, scores)
    m = scores.max(-1)
    e = b.exp(scores - m)
    lsum = e.sum(-1)
    p = b.quantize(e / lsum, T, "round")                                       # P cast to T for the cube
    out = b.matmul(p, vg).reshape([B, N1, S1, D])
    if input_layout in ("BSND", "BSH"):
        out = out.permute(0, 2, 1, 3)
    if input_layout == "BSH":
        out = out.reshape([B, S1, N1 * D])
    out = out.cast(T, "rint")                                                  # Fixpipe rounds to nearest even
    return {
        "softmax_max": m.reshape([B, N1, S1, 1]).broadcast_to([B, N1, S1, 8]),
        "softmax_sum": lsum.reshape([B, N1, S1, 1]).broadcast_to([B, N1, S1, 8]),
        "attention_out": out,
    }
