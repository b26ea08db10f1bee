"""QuantBatchMatmulV3 (ops-nn matmul/quant_batch_matmul_v3; aclnnQuantMatmulV4): y[M, N] = cast((x1 @ x2ᵀ) * scale
(+ bias)), x1 int8 [M, K], x2 int8 stored [N, K] (CANN's transpose_x2 = true layout), the product accumulated
exactly in int32 on the cube, converted to fp32 on the vector cores, multiplied by the per-channel scale [N], the
optional fp32 bias [N] added after the scale, rounded once to the output dtype (bf16 or fp16).

The operator of ops-nn matmul/quant_batch_matmul_v3 (inputs x1, x2, scale, offset, bias, pertoken_scale; output y;
attributes dtype, transpose_x1, transpose_x2, group_size). What differs: x2 only as [N, K] and x1 only as [M, K] (no
transpose attributes: an int8 B [K, N] needs a transposing load of 16 x 32 fractals, not modelled), the output
dtype a dtype row (bf16 or fp16) rather than the `dtype` attribute (no int8 output, no offset), the scale fp32 [N] (no per-tensor [1], no bf16 or
int64 scale), the bias fp32 only (no int32 bias added before the scale), no pertoken_scale (a per-row [M] input the
cube epilogue does not read yet), no batch dims; Atlas A2 / A3 only.

The int8 product is written as the interpreter computes it exactly: b.matmul(x1.cast(i32), x2.cast(i32)) (an int32
accumulator: exact while K < 2^17, docs/design.md "Cube family: int8 operands").
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i8, i32

spec = OpSpec("QuantBatchMatmulV3", aclnn="aclnnQuantMatmulV4", socs=(A2, A3), round="rint",
              doc="int8 matrix product, int32 accumulation, dequantised by a per-channel scale (and an optional "
                  "bias) to bf16 or fp16.")
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
(Y,) = spec.dtype_vars("Y")

spec.input("x1", i8, [M, K])
spec.input("x2", i8, [N, K])
spec.input("scale", f32, [N])
spec.input("bias", f32, [N], optional=True)
spec.output("y", Y, [M, N])
spec.dtypes((Y,), [(bf16,), (f16,)])   # CANN's `dtype` attribute values DT_BF16 and DT_FLOAT16

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"M": 37, "K": 50, "N": 45})


@spec.body
def _(b, x1, x2, scale, bias):
    acc = b.matmul(x1.cast(i32), x2.cast(i32), transpose_b=True)   # int8 x int8, int32 accumulation
    y = acc.cast(f32) * scale
    if bias is not None:
        y = y + bias
    return {"y": y.cast(Y, "rint")}
