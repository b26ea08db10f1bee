"""AddRmsNorm (aclnnAddRmsNorm): x = x1 + x2, y = RmsNorm(x) * gamma; returns y, rstd and the sum x.

Three outputs of one row kernel: the normalised row, its fp32 statistic and the residual sum itself.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("AddRmsNorm", aclnn="aclnnAddRmsNorm", socs=(A2, A3), round="rint",
              doc="Residual add followed by RmsNorm.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=32768)
(T,) = spec.dtype_vars("T")

spec.input("x1", T, [Bd, H])
spec.input("x2", T, [Bd, H])
spec.input("gamma", T, [H])
spec.attr("epsilon", float, 1e-6)
spec.output("y", T, [Bd, H])
spec.output("rstd", f32, [Bd, 1])
spec.output("x", T, [Bd, H], doc="x1 + x2")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


spec.package("ops-nn", "norm")  # where the package goes: ops-nn norm/<op_snake>


@spec.body
def _(b, x1, x2, gamma, epsilon):
    x = x1 + x2
    rstd = b.rsqrt((x * x).mean(-1) + epsilon)
    return {"y": x * rstd * gamma, "rstd": rstd, "x": x}
