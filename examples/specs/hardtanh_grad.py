"""HardtanhGrad (aclnnHardtanhBackward): out = gradOutput where minVal < self < maxVal, 0 elsewhere (NaN in self
gives 0).

Two comparisons with the attributes combined as masks (`&` and `~`: AscendC And / Not on the bit masks), then
Select's scalar form.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("HardtanhGrad", aclnn="aclnnHardtanhBackward", socs=(A2, A3), round="rint",
              doc="Gradient of Hardtanh: the incoming gradient inside (minVal, maxVal).")
Bd = spec.variadic("Bd", max_rank=8)
(T,) = spec.dtype_vars("T")

spec.input("gradOutput", T, [Bd], doc="gradient of Hardtanh's output")
spec.input("self", T, [Bd], doc="Hardtanh's input")
spec.attr("minVal", float, -1.0, doc="lower end of the linear range")
spec.attr("maxVal", float, 1.0, doc="upper end of the linear range")
spec.output("out", T, [Bd])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "activation")


@spec.body
def _(b, gradOutput, self, minVal, maxVal):
    inside = (self > minVal) & ~(self >= maxVal)
    return {"out": b.where(inside, gradOutput, 0.0)}
