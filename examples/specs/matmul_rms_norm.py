"""MatmulRmsNorm: y[M, N] = rmsnorm(x[M, K] @ w[K, N]) * gamma[N], rmsnorm(h) = h / sqrt(mean(h * h over N) +
epsilon), fp16 / bf16 in, fp32 accumulation on the cube, the row mean, the rsqrt and the scale in fp32 on the vector
cores, the result rounded once to the input dtype.

No CANN operator of ops-nn or ops-transformer has this formula alone (the nearest, MatmulAllReduceAddRmsNorm of
ops-transformer mc2, adds an all-reduce across devices and a residual), so the name says what it computes: a
projection followed by RMSNorm (RmsNorm's formula, examples/specs/rms_norm.py, over the product's rows).

The cube family's matmul with a vector epilogue holding a row reduction over N (docs/design.md "Cube family: row
reductions in the epilogue"): an AI Core's unit is a band of baseM rows x all of N, its blocks written by the AIC
into the band's fp32 workspace region, each row of the band reduced by the AIVs (whole rows in UB, or a row longer
than the UB holds in column chunks, a pass over them per reduction level; N's max 16384).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("MatmulRmsNorm", aclnn="aclnnMatmulRmsNorm", socs=(A2, A3), round="rint",
              doc="Matrix product, then RMSNorm over each row of the result scaled by gamma.")
M = spec.dim("M", max=65535)
K = spec.dim("K", max=65535)
N = spec.dim("N", max=16384)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [M, K])
spec.input("w", T, [K, N])
spec.input("gamma", T, [N])
spec.attr("epsilon", float, 1e-6)
spec.output("y", T, [M, N])
spec.dtypes((T,), [(f16,), (bf16,)])

spec.package("ops-nn", "matmul")  # where the package goes: ops-nn matmul/<op_snake>
spec.example_call({"M": 37, "K": 50, "N": 45})


@spec.body
def _(b, x, w, gamma, epsilon):
    h = b.matmul(x, w)
    rstd = b.rsqrt((h * h).mean(-1) + epsilon)
    return {"y": (h * rstd * gamma.cast(f32)).cast(T, "rint")}
