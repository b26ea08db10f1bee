"""TraceNorm: an RmsNorm written one named value per line, for tests/test_traceability.py (each emitted kernel
statement must cite the line defining the value it computes). Not a bundled op.
"""

from opgen.dsl import A2, OpSpec, f16, f32

spec = OpSpec("TraceNorm", aclnn="aclnnTraceNorm", socs=(A2,), round="rint",
              doc="Root-mean-square normalisation, one value per spec line.")
Bd = spec.variadic("Bd", max_rank=4)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [Bd, H])
spec.input("gamma", T, [H])
spec.attr("epsilon", float, 1e-6, doc="added to the mean square")
spec.output("y", T, [Bd, H])
spec.output("rstd", f32, [Bd, 1], doc="1 / sqrt(mean(x^2) + epsilon) per row")
spec.dtypes((T,), [(f32,), (f16,)])


spec.package("ops-nn", "norm")


@spec.body
def _(b, x, gamma, epsilon):
    square = x * x
    mean_square = square.mean(-1)
    inv_rms = b.rsqrt(mean_square + epsilon)
    normed = x * inv_rms
    scaled = normed * gamma
    return {"y": scaled, "rstd": inv_rms}
