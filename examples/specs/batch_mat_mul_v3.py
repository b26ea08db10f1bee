"""BatchMatMulV3 (ops-nn matmul/batch_mat_mul_v3) in its Linear form: y[*Bd, M, N] = x1[*Bd, M, K] @ op(x2) (+
bias[N]), op(x2) = x2[K, N] or, with adj_x2, x2[N, K] transposed (torch.nn.functional.linear's weight layout); any
number of leading batch dims on x1 against a 2-D x2 (NumPy matmul broadcasting), fp16 / bf16 in, fp32 accumulation on
the cube, the optional bias (fp16 or fp32 beside fp16, fp32 beside bf16) added in fp32, the result rounded once to the
input dtype.

The operator of ops-nn matmul/batch_mat_mul_v3 (inputs x1, x2, bias, offset_w; output y; attributes adj_x1, adj_x2,
offset_x, enable_hf32), whose infershape broadcasts the batch dims of 2- to 6-D operands; aclnnMatmul sends a 3-D
self against a 2-D mat2 to a single GEMM on [B*M, K] x [K, N] (its batch folded into the first dim). What differs:
this spec is the 2-D-weight form only (x2 without batch dims; a batched x2 is BatchMatMul's), no adj_x1 (x1
[*Bd, K, M] would not fold into one GEMM), no offset_w / offset_x (the int8 weight-offset form), no enable_hf32 (no
fp32 operands), no fp32 output beside fp16 / bf16 operands; Atlas A2 / A3 only.

The cube family folds the batch dims into M (GemmLayout.fold): the kernel is MatMulV3's, its M the product of the
batch dims and M; one kernel class per x2 layout (adj_x2, by the tiling key's attrKey), each serving the bias present
(added on the cube: the bias table seeds the first K chunk's Mmad) and absent.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("BatchMatMulV3", aclnn="aclnnBatchMatMulV3", socs=(A2, A3), round="rint",
              doc="Batched activations times a 2-D weight (the Linear form), the weight optionally transposed, plus "
                  "an optional bias.")
Bd = spec.variadic("Bd", max_rank=4)   # x1 2- to 6-D, as CANN's infershape takes it
M = spec.dim("M")   # no cap: the batch dims fold into M, whose pitch (K) is what Nd2Nz bounds
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
T, U = spec.dtype_vars("T U")

spec.attr("adj_x2", bool, False, static=True)
spec.input("x1", T, [Bd, M, K])
spec.input("x2", T, {False: [K, N], True: [N, K]}, form_by="adj_x2")
spec.input("bias", U, [N], optional=True)
spec.output("y", T, [Bd, M, N])
# CANN's BatchMatMulV3 rows (op_host/batch_mat_mul_v3_def.cpp) with an output of the operands' dtype, without fp32
# operands: the bias fp16 or fp32 beside fp16, fp32 beside bf16; added in fp32 either way
spec.dtypes((T, U), [(f16, f16), (f16, f32), (bf16, f32)])

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"Bd": (3,), "M": 37, "K": 50, "N": 45})


@spec.body
def _(b, x1, x2, bias, adj_x2):
    y = b.matmul(x1, x2, transpose_b=adj_x2)
    if bias is not None:
        y = y + bias.cast(f32)
    return {"y": y.cast(T, "rint")}
