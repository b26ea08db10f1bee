"""QuantBatchMatmulV3 (ops-nn matmul/quant_batch_matmul_v3; aclnnQuantMatmulV4): y[M, N] = cast((x1 @ x2) * scale
(* pertoken_scale) (+ bias)), x1 int8 stored [M, K] (CANN's default transpose_x1 = false) or [K, M] (transpose_x1 =
true: the product x1ᵀ @ x2), x2 int8 stored [K, N] (CANN's default transpose_x2 = false) or [N, K] (transpose_x2 =
true: the product x1 @ x2ᵀ), the product accumulated exactly in int32 on the cube, converted to fp32
on the vector cores, multiplied by the scale (per channel [N] or per tensor [1]), then by the optional per-row
pertoken_scale [M] (y[m, n] = acc[m, n] * scale[n] * pertoken[m]), and the optional bias [N], which enters by its
dtype as aclnnQuantMatmulV4's formulas state: an int32 bias joins the int32 sums before the scales ((x1 @ x2 + bias)
* scale * pertokenScaleOptional; on the cube, from the bias table), an fp32 one is added after them (x1 @ x2 * scale
* pertokenScaleOptional + bias; on the vector cores); rounded once to the output dtype (bf16 or fp16).

The parameters are CANN's (OpDef QuantBatchMatmulV3: inputs x1, x2, scale, offset, bias, pertoken_scale; output
y; attributes dtype, transpose_x1, transpose_x2, group_size; aclnnQuantMatmulV4(x1, x2, scale, offset,
pertokenScaleOptional, bias, transposeX1, transposeX2, out)). transpose_x1 and transpose_x2 are static: each picks its
operand's stored shape and the kernel class (x2 [K, N]: its 32 x 32 int8 squares transposed into L0B by
LoadDataWithTranspose; x2 [N, K]: one plain LoadData; x1 [K, M]: its squares transposed into L0A by
LoadDataWithTranspose, two fractal rows per 32 rows of m; docs/design.md "Cube family: int8 operands"). Those this
kernel does not implement are declared with the values it accepts (docs/design.md "Parameters a kernel does not
implement"): offset must be null (no int8 output), group_size 0 (aclnnQuantMatmulV4 does not pass it). dtype is
the ge::DataType of y (DT_BF16 27 or DT_FLOAT16 1): the aclnn API derives it from out. The scale's two shapes are shape forms the tensor picks at run
time (a [1] scale is read once per AIV by the scalar unit; each form its own class and form-key digit of the tiling
key, docs/design.md "Shape forms at run time"). What else differs: the scale fp32 only (no bf16 or int64 scale),
the bias int32 or fp32 (no bf16 or fp16 bias), no batch dims; Atlas A2 / A3 only. The bias's dtype variable BIAS is
static (docs/design.md "Dtype variables that select the body"): each dtype selects the body's form and its class.

The int8 product is written as the interpreter computes it exactly: b.matmul(x1.cast(i32), x2.cast(i32)) (an int32
accumulator: exact while K < 2^17, docs/design.md "Cube family: int8 operands").
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32, i8, i32

spec = OpSpec("QuantBatchMatmulV3", aclnn="aclnnQuantMatmulV4", socs=(A2, A3), round="rint",
              doc="int8 matrix product, int32 accumulation, dequantised by a per-channel scale (an optional "
                  "per-row scale, an optional bias) to bf16 or fp16.")
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
(Y,) = spec.dtype_vars("Y")
(BIAS,) = spec.dtype_vars("BIAS", static=True)   # the bias's dtype decides where it enters

# the attributes in CANN's OpDef order, before the inputs: transpose_x1 / transpose_x2 pick x1's / x2's stored shape
spec.attr("dtype", int, dtype_of=Y, doc="ge::DataType of y: DT_BF16 (27) or DT_FLOAT16 (1)")
spec.attr("transpose_x1", bool, False, static=True)
spec.attr("transpose_x2", bool, False, static=True)
spec.attr("group_size", int, 0, accepts=(0,), unsupported="grouped quantisation")
spec.input("x1", i8, {False: [M, K], True: [K, M]}, form_by="transpose_x1")
spec.input("x2", i8, {False: [K, N], True: [N, K]}, form_by="transpose_x2")
spec.input("scale", f32, [[N], [1]], doc="per-channel [N] or per-tensor [1]")
spec.input("offset", f32, [[N], [1]], optional=True, accepts="absent", unsupported="offset of an int8 output")
spec.input("bias", BIAS, [N], optional=True, doc="int32: before the scales; fp32: after them")
spec.input("pertoken_scale", f32, [M], optional=True, doc="pertokenScaleOptional: a per-row scale [M]")
spec.output("y", Y, [M, N])
spec.dtypes((Y, BIAS), [(bf16, i32), (bf16, f32), (f16, i32), (f16, f32)])
spec.aclnn_signature(api.param("x1"), api.param("x2"), api.param("scale"), api.param("offset"),
                     api.param("pertokenScaleOptional", "pertoken_scale"), api.param("bias"),
                     api.param("transposeX1", "transpose_x1"), api.param("transposeX2", "transpose_x2"),
                     api.fixed("group_size", 0), api.param("out", "y"), const_outputs=True)

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"M": 37, "K": 50, "N": 45})


@spec.body
def _(b, x1, x2, scale, offset, bias, pertoken_scale, dtype, transpose_x1, transpose_x2, group_size):
    acc = b.matmul(x1.cast(i32), x2.cast(i32), transpose_a=transpose_x1, transpose_b=transpose_x2)   # int32 sums
    if bias is not None and bias.dtype == i32:   # CANN: (x1 @ x2 + bias) * scale (* pertokenScaleOptional)
        acc = acc + bias
    y = acc.cast(f32) * scale
    if pertoken_scale is not None:   # CANN: x1 @ x2 * scale * pertokenScaleOptional + bias
        y = y * pertoken_scale.reshape([M, 1])
    if bias is not None and bias.dtype != i32:   # CANN: x1 @ x2 * scale (* pertokenScaleOptional) + bias
        y = y + bias
    return {"y": y.cast(Y, "rint")}
