"""NormRopeConcatGrad (aclnnNormRopeConcatBackward): gradients of NormRopeConcat.

Facts: docs/reference/norm_rope_concat.md §2 (RoPE adjoint on rows p < R, LayerNorm backward with the
provided mean/rstd, weight/bias grads per tensor, value grads are transposed copies), §2.1 (outputs,
weight grads in the grad dtype), §2.2 (Half = swap halves, the code not the doc), §2.3 (null encoders:
added weight grads are written as 0 when norm_added_type == 2), §3.2-3.3 (checks), §1.4/§2 step 4
(CAST_ROUND). OpDef names: norm_rope_concat_grad_def.cpp.
"""

from _nrc_common import STREAMS, declare_public_api, require_by_mode, require_rope_tables, rotate_t, split_rope, stream_parts

from opgen.dsl import A2, A3, A5, OpSpec, bf16, f16, f32

spec = OpSpec("NormRopeConcatGrad", aclnn="aclnnNormRopeConcatBackward", socs=(A2, A3, A5), round="round",
              doc="Backward of NormRopeConcat: RoPE adjoint, split, transpose back, LayerNorm backward.",
              source="CANN's NormRopeConcatGrad (ops-transformer posembedding/norm_rope_concat_grad: its docs and golden script)")
B, Sq, Sk, N, R = spec.dims("B Sq Sk N R")
Seq, Sek = spec.dims("Seq Sek", absent=0)
D = spec.dim("D", min=2, max=1024, multiple_of=2)
T, = spec.dtype_vars("T")

spec.input("grad_query_output", T, [B, N, Sq + Seq, D])
spec.input("grad_key_output", T, [B, N, Sk + Sek, D])
spec.input("grad_value_output", T, [B, N, Sk + Sek, D])
spec.input("query", T, [B, Sq, N, D])
spec.input("key", T, [B, Sk, N, D])
spec.input("encoder_query", T, [B, Seq, N, D], optional=True)
spec.input("encoder_key", T, [B, Sek, N, D], optional=True)
for _p, _s, _t, _part in (("norm_query", Sq, "norm_type", "query"), ("norm_key", Sk, "norm_type", "key"),
                          ("norm_added_query", Seq, "norm_added_type", "encoder_query"),
                          ("norm_added_key", Sek, "norm_added_type", "encoder_key")):
    spec.input(f"{_p}_weight", T, [D], optional=True, when=lambda a, pr, _t=_t, _part=_part: a[_t] == 2 and pr[_part],
               doc=f"used when {_t} == 2")
    for _what in ("mean", "rstd"):
        spec.input(f"{_p}_{_what}", f32, [B, _s, N, 1], optional=True,
                   when=lambda a, pr, _t=_t, _part=_part: a[_t] >= 1 and pr[_part], doc=f"used when {_t} >= 1")
spec.input("rope_sin", T, [R, D], optional=True, doc="required (see NormRopeConcat)")
spec.input("rope_cos", T, [R, D], optional=True)

spec.attr("norm_type", int, 0, choices=(0, 1, 2), static=True)
spec.attr("norm_added_type", int, 0, choices=(0, 1, 2), static=True)
spec.attr("rope_type", int, 0, choices=(0, 1, 2), static=True)
spec.attr("concat_order", int, 0, choices=(0, 1), static=True)

spec.output("grad_query", T, [B, Sq, N, D])
spec.output("grad_key", T, [B, Sk, N, D])
spec.output("grad_value", T, [B, Sk, N, D])
spec.output("grad_encoder_query", T, [B, Seq, N, D], optional=True)
spec.output("grad_encoder_key", T, [B, Sek, N, D], optional=True)
spec.output("grad_encoder_value", T, [B, Sek, N, D], optional=True)
for _p in ("norm_query", "norm_key", "norm_added_query", "norm_added_key"):
    spec.output(f"grad_{_p}_weight", T, [D], optional=True)
    spec.output(f"grad_{_p}_bias", T, [D], optional=True)

spec.dtypes((T,), [(f16,), (bf16,), (f32,)])

spec.require(R <= Sq + Seq, "rope_sin", "rows R must not exceed the query sequence Sq + Seq")
spec.require(R <= Sk + Sek, "rope_sin", "rows R must not exceed the key sequence Sk + Sek")

require_rope_tables(spec)
for _prefix, _attr, _part in STREAMS:
    for _what, _need in (("mean", 1), ("rstd", 1), ("weight", 2)):
        require_by_mode(spec, f"{_prefix}_{_what}", _attr, _need, _part)


# CANN's public parameters (docs/reference/norm_rope_concat.md §3.2), in order.
declare_public_api(spec, """gradQueryOutput gradKeyOutput gradValueOutput query key encoderQuery encoderKey normQueryWeight
    normQueryMean normQueryRstd normKeyWeight normKeyMean normKeyRstd normAddedQueryWeight normAddedQueryMean
    normAddedQueryRstd normAddedKeyWeight normAddedKeyMean normAddedKeyRstd ropeSin ropeCos normType normAddedType
    ropeType concatOrder gradQuery gradKey gradValue gradEncoderQuery gradEncoderKey gradEncoderValue
    gradNormQueryWeight gradNormQueryBias gradNormKeyWeight gradNormKeyBias gradNormAddedQueryWeight
    gradNormAddedQueryBias gradNormAddedKeyWeight gradNormAddedKeyBias""")
spec.package("ops-transformer", "posembedding")  # docs/reference/ops_package.md §1: ops-transformer posembedding/norm_rope_concat_grad
spec.example_call({"B": 1, "Sq": 4, "Sk": 4, "N": 2, "D": 8, "R": 4, "Seq": 2, "Sek": 2},
                  {"norm_type": 1, "rope_type": 1})

@spec.body
def _(b, grad_query_output, grad_key_output, grad_value_output, query, key, encoder_query, encoder_key,
      norm_query_weight, norm_query_mean, norm_query_rstd, norm_key_weight, norm_key_mean, norm_key_rstd,
      norm_added_query_weight, norm_added_query_mean, norm_added_query_rstd, norm_added_key_weight,
      norm_added_key_mean, norm_added_key_rstd, rope_sin, rope_cos, norm_type, norm_added_type, rope_type,
      concat_order):
    out = {}

    def rope_bwd(g, total):
        """[B, N, total, D] -> RoPE adjoint on the first R positions -> [B, total, N, D]."""
        if rope_type != 0:
            head, tail = split_rope(g, R, total)
            head = head * rope_cos + rotate_t(b, head * rope_sin, D, rope_type)
            g = b.concat([head, tail], 2)
        return g.permute(0, 2, 1, 3)

    def split(g, main_len, enc_len, has_enc):
        """The main and encoder parts of a [B, total, N, D] gradient, by concat order."""
        total = main_len + enc_len
        if not has_enc:
            return g, None
        if concat_order == 0:
            return g.slice(1, 0, main_len), g.slice(1, main_len, total)
        return g.slice(1, enc_len, total), g.slice(1, 0, enc_len)

    def ln_bwd(d, x, mean, rstd, t, w, name):
        if t == 0:
            return d
        xh = (x - mean) * rstd
        if t == 2:
            out[f"grad_{name}_weight"] = (d * xh).sum((0, 1, 2), keepdims=False)
            out[f"grad_{name}_bias"] = d.sum((0, 1, 2), keepdims=False)
            d = d * w
        return rstd * (d - d.mean(-1) - xh * (d * xh).mean(-1))

    gq, geq = split(rope_bwd(grad_query_output, grad_query_output.shape[2]), Sq, Seq, encoder_query is not None)
    gk, gek = split(rope_bwd(grad_key_output, grad_key_output.shape[2]), Sk, Sek, encoder_key is not None)
    gv, gev = split(grad_value_output.permute(0, 2, 1, 3), Sk, Sek, encoder_key is not None)
    out["grad_query"] = ln_bwd(gq, query, norm_query_mean, norm_query_rstd, norm_type, norm_query_weight,
                               "norm_query")
    out["grad_key"] = ln_bwd(gk, key, norm_key_mean, norm_key_rstd, norm_type, norm_key_weight, "norm_key")
    out["grad_value"] = gv
    if encoder_query is not None:
        out["grad_encoder_query"] = ln_bwd(geq, encoder_query, norm_added_query_mean, norm_added_query_rstd,
                                           norm_added_type, norm_added_query_weight, "norm_added_query")
    if encoder_key is not None:
        out["grad_encoder_key"] = ln_bwd(gek, encoder_key, norm_added_key_mean, norm_added_key_rstd,
                                         norm_added_type, norm_added_key_weight, "norm_added_key")
        out["grad_encoder_value"] = gev
    if norm_added_type == 2:
        zeros = b.const(0.0).broadcast_to([D])        # an absent encoder's weight grads are written as 0
        for name in ("norm_added_query", "norm_added_key"):
            out.setdefault(f"grad_{name}_weight", zeros)
            out.setdefault(f"grad_{name}_bias", zeros)
    return out


@spec.example
def _(rng, inputs, env, attrs):
    """Saved statistics of the generated query/key/encoder tensors (fp32, eps 1e-5)."""
    import numpy as np

    for prefix, part in (("norm_query", "query"), ("norm_key", "key"), ("norm_added_query", "encoder_query"),
                         ("norm_added_key", "encoder_key")):
        if inputs.get(part) is None or f"{prefix}_mean" not in inputs:
            continue
        x = inputs[part].astype(np.float64)
        mean = x.mean(-1, keepdims=True)
        inputs[f"{prefix}_mean"] = mean.astype(np.float32)
        inputs[f"{prefix}_rstd"] = (1 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)).astype(np.float32)
