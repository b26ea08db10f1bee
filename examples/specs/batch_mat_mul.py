"""BatchMatMul (aclnnBatchMatMul): out[B, M, N] = self[B, M, K] @ mat2[B, K, N], one matrix product per batch
index, fp16 / bf16 in, fp32 accumulation on the cube, the result rounded once to the input dtype by Fixpipe.

The cube family's batched GEMM: the blocks of every matrix over the AI Cores (a core's range may cross matrices).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16

spec = OpSpec("BatchMatMul", aclnn="aclnnBatchMatMul", socs=(A2, A3), round="rint",
              doc="Batched matrix product of two 3-D tensors.")
B = spec.dim("B", max=65535)
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [B, M, K])
spec.input("mat2", T, [B, K, N])
spec.output("out", T, [B, M, N])
spec.dtypes((T,), [(f16,), (bf16,)])

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"B": 3, "M": 37, "K": 50, "N": 45})


@spec.body
def _(b, self, mat2):
    return {"out": b.matmul(self, mat2).cast(T, "rint")}
