"""MatMul (aclnnMm): out[M, N] = self[M, K] @ mat2[K, N], fp16 / bf16 in, fp32 accumulation on the cube, the
result rounded once to the input dtype by Fixpipe.

The cube family's plain GEMM: blocks of the output over the AI Cores (tails on every edge), K in chunks.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16

spec = OpSpec("MatMul", aclnn="aclnnMm", socs=(A2, A3), round="rint",
              doc="Matrix product of two 2-D tensors.")
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [M, K])
spec.input("mat2", T, [K, N])
spec.output("out", T, [M, N])
spec.dtypes((T,), [(f16,), (bf16,)])

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"M": 37, "K": 50, "N": 45})


@spec.body
def _(b, self, mat2):
    return {"out": b.matmul(self, mat2).cast(T, "rint")}
