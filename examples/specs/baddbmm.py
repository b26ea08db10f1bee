"""Baddbmm (aclnnBaddbmm): out[B, M, N] = beta * self + alpha * (batch1[B, M, K] @ batch2[B, K, N]), self broadcast
to [B, M, N] from [B, M, N], [M, N] (one matrix for every batch index), [B, 1, N] (a row of N per batch index),
[N] / [1, N] (one row of N for all), [B, 1, 1] (one value per batch index), [1] (one value), [M, 1] (one value per
row for every batch index) or [B, M, 1] (one value per row and batch index); fp16 / bf16 in, fp32 accumulation on the
cube, beta * self added in fp32 on the vector cores, the result rounded once to the input dtype.

The parameters are CANN's (ops-nn matmul/batch_mat_mul_v3 op_api aclnn_baddbmm.h: aclnnBaddbmm(self, batch1, batch2,
const aclScalar* beta, const aclScalar* alpha, out, int8_t cubeMathType, ...)); aclnnBaddbmm is an aclnn composition
(a batched matmul, Muls, Axpy, or GemmV3 with alpha / beta), so the OpDef is this spec's own, named after the API.
beta and alpha are float attributes passed as aclScalar; cubeMathType is taken (0 .. 4) and changes nothing for
fp16 / bf16 operands but its mode 4's fp32 intermediate, which this kernel always uses (the matmul's fp32 result,
alpha and beta * self in fp32, one rounding).

What differs from CANN: fp16 / bf16 only (no fp32 operands, no hf32); batch1 and batch2 of one batch dim B (CANN
broadcasts a batch of 1 between them); beta 0 multiplies self (a NaN or inf in self gives NaN where CANN ignores
self); Atlas A2 / A3 only.

The cube family's batched matmul with a vector epilogue whose input is read against the batch by its shape
(docs/design.md "Cube family: epilogue inputs broadcast over the batch"): [M, N] at the same rows for every batch
index, [B, 1, N] one row per batch index, [B, 1, 1] one value per batch index read by the scalar unit, [M, 1] and
[B, M, 1] a pass's rows staged in T and Cast to fp32 for the scalar unit to read per row; each self form that reads
otherwise its own kernel class (the tiling key's form digit).
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32

spec = OpSpec("Baddbmm", aclnn="aclnnBaddbmm", socs=(A2, A3), round="rint",
              doc="beta * self + alpha * (batch1 @ batch2), self broadcast over the batch.")
B = spec.dim("B", max=65535)
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=65535)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [[B, M, N], [M, N], [B, 1, N], [N], [1, N], [B, 1, 1], [1],
                          [M, 1], [B, M, 1]])
spec.input("batch1", T, [B, M, K])
spec.input("batch2", T, [B, K, N])
spec.attr("beta", float, 1.0, doc="the factor of self")
spec.attr("alpha", float, 1.0, doc="the factor of batch1 @ batch2")
spec.attr("cube_math_type", int, 0, choices=(0, 1, 2, 3, 4),
          doc="CANN's cube precision mode (no effect on fp16 / bf16 operands: fp32 accumulation always)")
spec.output("out", T, [B, M, N])
spec.dtypes((T,), [(f16,), (bf16,)])
spec.aclnn_signature(api.param("self"), api.param("batch1"), api.param("batch2"), api.scalar("beta"),
                     api.scalar("alpha"), api.param("out"),
                     api.param("cubeMathType", "cube_math_type", ctype="int8_t"))

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"B": 3, "M": 37, "K": 50, "N": 45})


@spec.body
def _(b, self, batch1, batch2, beta, alpha, cube_math_type):
    y = b.matmul(batch1, batch2) * alpha + self.cast(f32) * beta
    return {"out": y.cast(T, "rint")}
