"""TransposeBatchMatMul (ops-nn matmul/transpose_batch_mat_mul; aclnnTransposeBatchMatMul): y = permute(x1' @ x2',
perm_y), x1' = permute(x1, perm_x1) [B, M, K], x2' = permute(x2, perm_x2) [B, K, N], one matrix product per batch
index, fp16 / bf16 in, fp32 accumulation on the cube, the result rounded once to the input dtype and written [M, B, N]
(perm_y = [1, 0, 2], the only one CANN takes).

The parameters are CANN's (OpDef TransposeBatchMatMul: inputs x1, x2, bias, scale; output y; attributes perm_x1,
perm_x2, perm_y, enable_hf32, batch_split_factor; perm[i] is the stored axis that becomes axis i, NumPy's
transpose). perm_x1 is [0, 1, 2] (x1 stored [B, M, K]) or [1, 0, 2] (stored [M, B, K]: attention's BSND heads read
head-major), perm_x2 [0, 1, 2] (x2 stored [B, K, N]) or [0, 2, 1] (stored [B, N, K]): each picks its input's stored
shape (`form_by`) and the kernel class (the tiling key's attrKey). None of the permutes is a copy: the cube family
reads each operand through a strided GM view (docs/design.md "Cube family: operands and output through permuted GM
views"): x1 [M, B, K]'s matrix b is rows of K at a row stride of B * K, its matrices K apart; the output's rows of N
land at a row stride of B * N, its matrices N apart.

Declared with the values this kernel accepts (docs/design.md "Parameters a kernel does not implement"): bias and
scale must be null (aclnnTransposeBatchMatMul passes no bias to the kernel; scale is the fp16 -> int8 quantised
output), enable_hf32 false (no fp32 operands), batch_split_factor 1 (the [factor, M, B * N / factor] output form).
The aclnn API is CANN's but for cubeMathType, which it does not take (enable_hf32 passed false). What else differs:
fp16 / bf16 operands only (no fp32 rows, no FRACTAL_NZ x2, no aclnnTransposeBatchMatMulWeightNz); Atlas A2 / A3
only.
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, i64

spec = OpSpec("TransposeBatchMatMul", aclnn="aclnnTransposeBatchMatMul", socs=(A2, A3), round="rint",
              doc="Batched matrix product whose left operand and output are read and written through permutations "
                  "of their batch and row axes.")
B = spec.dim("B", max=65535)
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
(T,) = spec.dtype_vars("T")

spec.attr("perm_x1", list[int], (0, 1, 2), static=True, choices=((0, 1, 2), (1, 0, 2)))
spec.attr("perm_x2", list[int], (0, 1, 2), static=True, choices=((0, 1, 2), (0, 2, 1)))
spec.attr("perm_y", list[int], (1, 0, 2), static=True, choices=((1, 0, 2),))
spec.attr("enable_hf32", bool, False, accepts=(False,), unsupported="hf32 for fp32 operands")
spec.attr("batch_split_factor", int, 1, accepts=(1,), unsupported="an output split along the batch")
spec.input("x1", T, {(0, 1, 2): [B, M, K], (1, 0, 2): [M, B, K]}, form_by="perm_x1")
spec.input("x2", T, {(0, 1, 2): [B, K, N], (0, 2, 1): [B, N, K]}, form_by="perm_x2")
spec.input("bias", T, [N], optional=True, accepts="absent", unsupported="a bias (aclnnTransposeBatchMatMul passes "
           "none to the kernel)")
spec.input("scale", i64, [N], optional=True, accepts="absent", unsupported="the int8 quantised output")
spec.output("y", T, [M, B, N])
# x1 [M, B, K]'s rows of K lie B * K apart: the row pitch of its copy to L1 (CANN's rule for that form, Nd2Nz's
# uint16 source pitch)
spec.require(B * K <= 65535, "x1", "{x1} stored [M, B, K] needs B * K <= 65535",
             when=lambda a, present: tuple(a["perm_x1"]) == (1, 0, 2))
spec.dtypes((T,), [(f16,), (bf16,)])
# aclnnTransposeBatchMatMul(x1, x2, bias, scale, permX1, permX2, permY, cubeMathType, batchSplitFactor, out):
# cubeMathType (CANN's int8 enum choosing hf32 for fp32 operands) is not taken, enable_hf32 passed as false
spec.aclnn_signature(api.param("x1"), api.param("x2"), api.param("bias"), api.param("scale"),
                     api.param("permX1", "perm_x1"), api.param("permX2", "perm_x2"), api.param("permY", "perm_y"),
                     api.fixed("enable_hf32", False),
                     api.param("batchSplitFactor", "batch_split_factor", ctype="int32_t"), api.param("out", "y"))

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"B": 3, "M": 37, "K": 50, "N": 45})


@spec.body
def _(b, x1, x2, bias, scale, perm_x1, perm_x2, perm_y, enable_hf32, batch_split_factor):
    y = b.matmul(x1.permute(*perm_x1), x2.permute(*perm_x2))   # [B, M, N]: the operands through their permutations
    return {"y": y.permute(*perm_y).cast(T, "rint")}
