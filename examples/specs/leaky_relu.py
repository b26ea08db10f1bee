"""LeakyRelu (aclnnLeakyRelu): y = x where x > 0, else negative_slope * x — written with a compare and `b.where`.

The rows family lowers the compare to CompareScalar (a bit mask) and the choice to Select; pure elementwise, the
kernel sees the whole tensor as one run of elements split over the cores. The public API takes the slope as
`const aclScalar* negativeSlope`, as CANN's does.
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32

spec = OpSpec("LeakyRelu", aclnn="aclnnLeakyRelu", socs=(A2, A3), round="rint",
              doc="Leaky rectified linear unit.")
Bd = spec.variadic("Bd", max_rank=8)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [Bd])
spec.attr("negative_slope", float, 0.01, doc="the slope for x <= 0")
spec.output("out", T, [Bd])
# CANN's API passes the slope as a scalar operand: aclnnLeakyRelu(self, const aclScalar* negativeSlope, out)
spec.aclnn_signature(api.param("self"), api.scalar("negativeSlope", "negative_slope"), api.param("out"))
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "activation")


@spec.body
def _(b, self, negative_slope):
    x = self
    return {"out": b.where(x > 0.0, x, x * negative_slope)}
