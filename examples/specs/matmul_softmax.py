"""MatmulSoftmax: y[M, N] = softmax(x[M, K] @ w[K, N] * scale) over N, softmax(s) = exp(s - max(s)) / sum(exp(s -
max(s))), fp16 / bf16 in, fp32 accumulation on the cube, the scale, the row maximum, the exponentials and the row
sum in fp32 on the vector cores, the result rounded once to the input dtype.

No CANN operator of ops-nn or ops-transformer has this formula alone (attention's score softmax is inside
FlashAttentionScore, whose keys are a second operand read twice), so the name says what it computes: the
attention-like softmax(x @ w * scale) of one matrix product (SoftmaxV2's formula, examples/specs/softmax.py, over the
product's rows).

The cube family's matmul with a vector epilogue holding two row reductions over N of two levels (the maximum, then
the sum of the shifted exponentials; docs/design.md "Cube family: row reductions in the epilogue"): an AI Core's
unit is a band of baseM rows x all of N (whole rows in UB, or a row longer than the UB holds in column chunks: three
passes over them; N's max 16384).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16

spec = OpSpec("MatmulSoftmax", aclnn="aclnnMatmulSoftmax", socs=(A2, A3), round="rint",
              doc="Matrix product times a scale, then softmax over each row of the result.")
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=16384)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [M, K])
spec.input("w", T, [K, N])
spec.attr("scale", float, 1.0)
spec.output("y", T, [M, N])
spec.dtypes((T,), [(f16,), (bf16,)])

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"M": 37, "K": 50, "N": 45})


@spec.body
def _(b, x, w, scale):
    s = b.matmul(x, w) * scale
    e = b.exp(s - s.max(-1))
    return {"y": (e / e.sum(-1)).cast(T, "rint")}
