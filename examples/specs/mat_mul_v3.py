"""MatMulV3 (ops-nn matmul/mat_mul_v3): y[M, N] = op(x1) @ op(x2) (+ bias[N]), op(x1) = x1[M, K] or, with
transpose_x1, x1[K, M] transposed; op(x2) = x2[K, N] or, with transpose_x2, x2[N, K] transposed; fp16 / bf16 in,
fp32 accumulation on the cube, the optional bias (fp16 or fp32 beside fp16 operands, fp32 beside bf16) added in fp32,
the result rounded once to the input dtype.

The operator of ops-nn matmul/mat_mul_v3 (inputs x1, x2, bias, offset_w; output y; attributes transpose_x1,
transpose_x2, offset_x, opImplMode). What differs: no offset_w / offset_x (its int8 weight-offset form) and no
opImplMode, no fp32 operands (the cube reads f16 / bf16 here); Atlas A2 / A3 only.

The cube family serves every combination: the two static attributes select the operands' layout, one kernel class
per layout chosen by the tiling key's attrKey, templated on the operands' type T and the bias's U (staged in U, then
converted to fp32 on its way to the bias table); one class serves the bias present and absent (hasInput0_: the
bias row seeds the first K chunk's Mmad from the bias table, as CANN's MatMulV3 adds it on the cube; either way
Fixpipe's cast is the whole epilogue, so the call launches AIC only unless K is split).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("MatMulV3", aclnn="aclnnMatMulV3", socs=(A2, A3), round="rint",
              doc="Matrix product of two 2-D tensors, either transposed, plus an optional bias.")
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
T, U = spec.dtype_vars("T U")

spec.attr("transpose_x1", bool, False, static=True)
spec.attr("transpose_x2", bool, False, static=True)
spec.input("x1", T, {False: [M, K], True: [K, M]}, form_by="transpose_x1")
spec.input("x2", T, {False: [K, N], True: [N, K]}, form_by="transpose_x2")
spec.input("bias", U, [N], optional=True)
spec.output("y", T, [M, N])
# CANN's MatMulV3 ND rows (op_host/mat_mul_v3_def.cpp) without its fp32 operands: the bias fp16 or fp32 beside fp16,
# fp32 beside bf16; added in fp32 either way
spec.dtypes((T, U), [(f16, f16), (f16, f32), (bf16, f32)])

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"M": 37, "K": 50, "N": 45})


@spec.body
def _(b, x1, x2, bias, transpose_x1, transpose_x2):
    y = b.matmul(x1, x2, transpose_a=transpose_x1, transpose_b=transpose_x2)
    if bias is not None:
        y = y + bias.cast(f32)
    return {"y": y.cast(T, "rint")}
