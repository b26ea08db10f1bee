"""WeightQuantBatchMatmulV2 (ops-nn matmul/weight_quant_batch_matmul_v2; aclnnWeightQuantBatchMatmulV2):
y[M, N] = x @ ANTIQUANT(weight) (+ bias), ANTIQUANT(weight) = (weight + antiquantOffset) * antiquantScale, x fp16 or
bf16 [M, K], weight int8 [K, N] (CANN's default transpose_weight = false), antiquantScale in x's dtype per channel
[N] (antiquantGroupSize 0) or per group [ceil(K / antiquantGroupSize), N] (row k of the weight takes row k /
antiquantGroupSize; the last group partial when the group size does not divide K), the optional antiquantOffset
of the scale's shape and dtype, the optional bias [N] (fp16 beside fp16 x, fp32 beside bf16 x: CANN's rule), y in
x's dtype.

The weight's dequantisation is a matmul operand computed in the kernel: the AIVs convert the int8 weight (int8 ->
half, exact; -> fp32), add the offset and multiply by the scale in fp32, round once to x's dtype and write the
dequantised [K, N] weight to the workspace, where the cube reads it as its B operand (docs/design.md "Cube family:
an operand computed on the vector cores"). CANN's own A2 kernel does the same exchange (AIVs -> workspace -> AIC)
with the arithmetic in fp32 for bf16 x, but in half for fp16 x (the add rounded to half before the multiply); this
spec computes both in fp32 and rounds once (at most half an fp16 ulp of the sum apart).

The parameters are CANN's (OpDef WeightQuantBatchMatmulV2: inputs x, weight, antiquant_scale, antiquant_offset,
quant_scale, quant_offset, bias; output y; attributes transpose_x, transpose_weight, antiquant_group_size, dtype,
inner_precise; aclnnWeightQuantBatchMatmulV2(x, weight, antiquantScale, antiquantOffsetOptional,
quantScaleOptional, quantOffsetOptional, biasOptional, antiquantGroupSize, y)). What this kernel does not implement
is declared with the values it accepts (docs/design.md "Parameters a kernel does not implement"): quant_scale and
quant_offset must be null (no int8 output), transpose_x and transpose_weight false, dtype -1 and inner_precise 0;
antiquant_group_size is static with the values 0 (per channel), 32, 64 and 128, each below K (CANN takes any
multiple of 32 in [32, K - 1]); the scale fp16 / bf16 only (no UINT64 / INT64 scale), int8 weights only (no INT4 / INT32 packing), no
per-tensor [1] scale; Atlas A2 / A3 only.
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32, i8

spec = OpSpec("WeightQuantBatchMatmulV2", aclnn="aclnnWeightQuantBatchMatmulV2", socs=(A2, A3), round="rint",
              doc="matrix product of x with an int8 weight dequantised per channel ((weight + offset) * scale) on "
                  "the vector cores, plus an optional bias.")
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
X, BIAS = spec.dtype_vars("X BIAS")
GROUP_SIZES = (0, 32, 64, 128)   # antiquant_group_size: 0 per channel, else rows of K per scale row

# CANN's attributes in OpDef order (antiquant_group_size picks the scale's shape and the kernel class; the others
# take their one implemented value)
spec.attr("transpose_x", bool, False, accepts=(False,), unsupported="x stored [K, M]")
spec.attr("transpose_weight", bool, False, accepts=(False,), unsupported="weight stored [N, K]")
spec.attr("antiquant_group_size", int, 0, choices=GROUP_SIZES, static=True,
          doc="0: per-channel scale [N]; a group size: per-group scale [ceil(K / group size), N]")
spec.attr("dtype", int, -1, accepts=(-1,), unsupported="an int8 output")
spec.attr("inner_precise", int, 0, accepts=(0,), unsupported="the high-performance mode")
spec.input("x", X, [M, K])
spec.input("weight", i8, [K, N])
SCALE_SHAPES = {g: [(K + (g - 1)) // g, N] if g else [N] for g in GROUP_SIZES}   # ceil(K / g) rows per group
spec.input("antiquant_scale", X, SCALE_SHAPES, form_by="antiquant_group_size",
           doc="per-channel [N] or per-group [ceil(K / antiquant_group_size), N], x's dtype")
spec.input("antiquant_offset", X, SCALE_SHAPES, form_by="antiquant_group_size", optional=True,
           doc="the scale's shape, x's dtype")
spec.input("quant_scale", f32, [N], optional=True, accepts="absent", unsupported="output quantisation")
spec.input("quant_offset", f32, [N], optional=True, accepts="absent", unsupported="output quantisation")
spec.input("bias", BIAS, [N], optional=True, doc="fp16 beside fp16 x, fp32 beside bf16 x")
spec.output("y", X, [M, N])
spec.dtypes((X, BIAS), [(f16, f16), (bf16, f32)])
for _g in GROUP_SIZES[1:]:   # CANN: a per-group size lies in [32, K - 1] (at least two groups)
    spec.require(K > _g, "antiquant_group_size", f"{{antiquant_group_size}} {_g} needs more than {_g} rows of "
                 "K: CANN takes a group size in [32, K - 1]", when=lambda a, pr, g=_g: a["antiquant_group_size"] == g)
spec.aclnn_signature(api.param("x"), api.param("weight"), api.param("antiquantScale", "antiquant_scale"),
                     api.param("antiquantOffsetOptional", "antiquant_offset"),
                     api.param("quantScaleOptional", "quant_scale"), api.param("quantOffsetOptional", "quant_offset"),
                     api.param("biasOptional", "bias"), api.param("antiquantGroupSize", "antiquant_group_size"),
                     api.fixed("transpose_x", False), api.fixed("transpose_weight", False), api.fixed("dtype", -1),
                     api.fixed("inner_precise", 0), api.param("y"), const_outputs=True)

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"M": 37, "K": 200, "N": 45})   # any K above the group size: a last partial group too


@spec.body
def _(b, x, weight, antiquant_scale, antiquant_offset, quant_scale, quant_offset, bias, transpose_x,
      transpose_weight, antiquant_group_size, dtype, inner_precise):
    g = antiquant_group_size   # static: 0 per channel, else the rows of K per scale row
    w = weight.cast(f32)   # int8 -> fp32: exact

    def per(t):   # the scale's or offset's rows as w's operand: row k of the weight takes row k // g (per group)
        return t.cast(f32).repeat_interleave(g, 0, K) if g else t.cast(f32)
    if antiquant_offset is not None:   # CANN: (weight + antiquantOffset) * antiquantScale
        w = w + per(antiquant_offset)
    w = w * per(antiquant_scale)
    w = b.quantize(w, X, "rint")   # the dequantised weight, rounded to x's dtype
    y = b.matmul(x.f32(), w)
    if bias is not None:
        y = y + bias.cast(f32)
    return {"y": y.cast(X, "rint")}
