"""FusedMatMul (aclnnFusedMatmul) in its fusedOpType "add" form: y[B, M, N] = x1[B, M, K] @ x2[B, K, N] + bias[N] +
x3[B, M, N], fp16 / bf16 in, fp32 accumulation on the cube, the bias and the residual x3 added in fp32 on the
vector cores, the result rounded once to the input dtype.

The operator of ops-nn matmul/fused_mat_mul (inputs x1, x2, bias, x3, output y; attributes transpose_x1,
transpose_x2, enable_hf32, fused_op_type, inner_precise). What differs: this spec is one fixed instance of it —
fused_op_type "add" with its bias and 3-D operands, no transposes, no hf32 — as an operator of its own without the
attributes; CANN builds FusedMatMul for Ascend 950 only, this spec targets Atlas A2 / A3.

The cube family's batched matmul with a vector epilogue reading a residual: the blocks of every matrix over the AI
Cores, each block through one of two workspace slots per AI Core to its two AIVs.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("FusedMatMul", aclnn="aclnnFusedMatmul", socs=(A2, A3), round="rint",
              doc="Batched matrix product plus bias plus a residual tensor.")
B = spec.dim("B", max=65535)
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
(T,) = spec.dtype_vars("T")

spec.input("x1", T, [B, M, K])
spec.input("x2", T, [B, K, N])
spec.input("bias", T, [N])
spec.input("x3", T, [B, M, N])
spec.output("y", T, [B, M, N])
spec.dtypes((T,), [(f16,), (bf16,)])

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"B": 3, "M": 37, "K": 50, "N": 45})


@spec.body
def _(b, x1, x2, bias, x3):
    y = b.matmul(x1, x2) + bias.cast(f32) + x3.cast(f32)
    return {"y": y.cast(T, "rint")}
