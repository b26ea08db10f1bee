"""NormRopeConcat (aclnnNormRopeConcat): per-stream LayerNorm, sequence concat with the encoder
stream, BSND -> BNSD transpose and RoPE on the first R concatenated positions.

Facts: docs/reference/norm_rope_concat.md §1.1 (pipeline), §1.2 (norm modes 0/1/2, eps, stats [B,S,N,1]
fp32 when is_training), §1.3 (RoPE interleave/half, rows p < R of the tables), §1.4 (fp32 inside,
CAST_ROUND outputs), §1.6 (null encoders), §3.3 (recommended validation: D even <= 1024, Sk == Sv,
encoder_key present iff encoder_value present with Sek == Sev, weights present for type 2,
rope tables present with 1 <= R <= min(SQ, SK)). OpDef names: norm_rope_concat_def.cpp.
"""

from _nrc_common import STREAMS, declare_public_api, require_by_mode, require_rope_tables, rotate, split_rope, stream_parts

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("NormRopeConcat", aclnn="aclnnNormRopeConcat", socs=(A2, A3), round="round",
              doc="LayerNorm + concat + transpose + RoPE of query/key (value: concat + transpose).",
              source="CANN's NormRopeConcat (ops-transformer posembedding/norm_rope_concat: its docs and golden script)")
B, Sq, Sk, N, R = spec.dims("B Sq Sk N R")
Seq, Sek = spec.dims("Seq Sek", absent=0)
D = spec.dim("D", min=2, max=1024, multiple_of=2)
T, = spec.dtype_vars("T")

spec.input("query", T, [B, Sq, N, D])
spec.input("key", T, [B, Sk, N, D])
spec.input("value", T, [B, Sk, N, D], doc="Sv must equal Sk")
spec.input("encoder_query", T, [B, Seq, N, D], optional=True)
spec.input("encoder_key", T, [B, Sek, N, D], optional=True)
spec.input("encoder_value", T, [B, Sek, N, D], optional=True)
for _w, _t, _part in (("norm_query", "norm_type", "query"), ("norm_key", "norm_type", "key"),
                      ("norm_added_query", "norm_added_type", "encoder_query"),
                      ("norm_added_key", "norm_added_type", "encoder_key")):
    for _what in ("weight", "bias"):
        spec.input(f"{_w}_{_what}", T, [D], optional=True,
                   when=lambda a, pr, _t=_t, _part=_part: a[_t] == 2 and pr[_part], doc=f"used when {_t} == 2")
spec.input("rope_sin", T, [R, D], optional=True, doc="required: row p rotates concatenated position p < R")
spec.input("rope_cos", T, [R, D], optional=True)

spec.attr("norm_type", int, 0, choices=(0, 1, 2), static=True, doc="query/key: 0 none, 1 LN, 2 affine LN")
spec.attr("norm_added_type", int, 0, choices=(0, 1, 2), static=True, doc="encoder query/key norm")
spec.attr("rope_type", int, 0, choices=(0, 1, 2), static=True, doc="0 none, 1 interleave, 2 half")
spec.attr("concat_order", int, 0, choices=(0, 1), static=True, doc="0: [main, encoder]; 1: [encoder, main]")
spec.attr("eps", float, 1e-5)
spec.attr("is_training", bool, False, static=True, doc="also output mean/rstd of normalised streams")

spec.output("query_output", T, [B, N, Sq + Seq, D])
spec.output("key_output", T, [B, N, Sk + Sek, D])
spec.output("value_output", T, [B, N, Sk + Sek, D])
for _p, _s in (("norm_query", Sq), ("norm_key", Sk), ("norm_added_query", Seq), ("norm_added_key", Sek)):
    spec.output(f"{_p}_mean", f32, [B, _s, N, 1], optional=True)
    spec.output(f"{_p}_rstd", f32, [B, _s, N, 1], optional=True)

spec.dtypes((T,), [(f16,), (bf16,), (f32,)])

spec.require(R <= Sq + Seq, "rope_sin", "rows R must not exceed the query sequence Sq + Seq")
spec.require(R <= Sk + Sek, "rope_sin", "rows R must not exceed the key sequence Sk + Sek")


require_rope_tables(spec)
for _prefix, _attr, _part in STREAMS:
    for _what in ("weight", "bias"):
        require_by_mode(spec, f"{_prefix}_{_what}", _attr, 2, _part)
spec.check("encoder_value", lambda a, pr: None if pr["encoder_key"] == pr["encoder_value"] else
           "must be given exactly when {encoder_key} is given")


# CANN's public parameters (docs/reference/norm_rope_concat.md §3.1), in order.
declare_public_api(spec, """query key value encoderQuery encoderKey encoderValue normQueryWeight normQueryBias normKeyWeight
    normKeyBias normAddedQueryWeight normAddedQueryBias normAddedKeyWeight normAddedKeyBias ropeSin ropeCos normType
    normAddedType ropeType concatOrder eps isTraining queryOutput keyOutput valueOutput normQueryMean normQueryRstd
    normKeyMean normKeyRstd normAddedQueryMean normAddedQueryRstd normAddedKeyMean normAddedKeyRstd""")
spec.package("ops-transformer", "posembedding")  # docs/reference/ops_package.md §1: ops-transformer posembedding/norm_rope_concat
spec.example_call({"B": 1, "Sq": 4, "Sk": 4, "N": 2, "D": 8, "R": 4, "Seq": 2, "Sek": 2},
                  {"norm_type": 1, "rope_type": 1})

@spec.body
def _(b, query, key, value, encoder_query, encoder_key, encoder_value, norm_query_weight, norm_query_bias,
      norm_key_weight, norm_key_bias, norm_added_query_weight, norm_added_query_bias, norm_added_key_weight,
      norm_added_key_bias, rope_sin, rope_cos, norm_type, norm_added_type, rope_type, concat_order, eps,
      is_training):
    out = {}

    def norm(x, t, w, bias, stat_name):
        if t == 0:
            return x
        mean = x.mean(-1)
        xc = x - mean
        std = b.sqrt((xc * xc).mean(-1) + eps)
        y = xc / std                                  # the kernel divides by std (§7.12)
        if t == 2:
            y = y * w + bias
        if is_training:
            out[f"{stat_name}_mean"] = mean
            out[f"{stat_name}_rstd"] = b.recip(std)
        return y

    def stream(main, enc, rope):
        c = b.concat(stream_parts(main, enc, concat_order), 1).permute(0, 2, 1, 3)   # [B, N, total, D]
        if not rope or rope_type == 0:
            return c
        head, tail = split_rope(c, R, c.shape[2])
        head = head * rope_cos + rotate(b, head, D, rope_type) * rope_sin
        return b.concat([head, tail], 2)

    q = norm(query, norm_type, norm_query_weight, norm_query_bias, "norm_query")
    k = norm(key, norm_type, norm_key_weight, norm_key_bias, "norm_key")
    eq = ek = None
    if encoder_query is not None:
        eq = norm(encoder_query, norm_added_type, norm_added_query_weight, norm_added_query_bias,
                  "norm_added_query")
    if encoder_key is not None:
        ek = norm(encoder_key, norm_added_type, norm_added_key_weight, norm_added_key_bias, "norm_added_key")
    out["query_output"] = stream(q, eq, True)
    out["key_output"] = stream(k, ek, True)
    out["value_output"] = stream(value, encoder_value, False)
    return out
