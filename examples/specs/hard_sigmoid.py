"""HardSigmoid (aclnnHardsigmoid): y = max(0, min(1, alpha * x + beta)), elementwise.

CANN's OpDef HardSigmoid has the attributes alpha (1/6) and beta (0.5), but its public API takes only self and out
(aclnnHardsigmoid(self, out)): `api.fixed` leaves them out of the signature and the aclnn layer always passes
those values; graph mode may still set them.
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32

spec = OpSpec("HardSigmoid", aclnn="aclnnHardsigmoid", socs=(A2, A3), round="rint",
              doc="Hard sigmoid: a clamped line through (0, beta) of slope alpha.")
Bd = spec.variadic("Bd", max_rank=8)
(T,) = spec.dtype_vars("T")

spec.input("input_x", T, [Bd])
spec.attr("alpha", float, 1.0 / 6.0, doc="the slope")
spec.attr("beta", float, 0.5, doc="the value at 0")
spec.output("output_y", T, [Bd])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.aclnn_signature(api.param("self", "input_x"), api.fixed("alpha", 1.0 / 6.0), api.fixed("beta", 0.5),
                     api.param("out", "output_y"))
spec.package("ops-nn", "activation")


@spec.body
def _(b, input_x, alpha, beta):
    return {"output_y": b.clamp(input_x * alpha + beta, 0.0, 1.0)}
