"""ThresholdGradV2D (aclnnThresholdBackward, the gradient of Threshold and of Relu at threshold 0):
out = gradOutput where self > threshold, 0 elsewhere.

The comparison with the attribute is a CompareScalar; the choice Select's scalar form (mask ? row : 0.0).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("ThresholdGradV2D", aclnn="aclnnThresholdBackward", socs=(A2, A3), round="rint",
              doc="Gradient of Threshold: the incoming gradient where the input exceeded the threshold.")
Bd = spec.variadic("Bd", max_rank=8)
(T,) = spec.dtype_vars("T")

spec.input("gradOutput", T, [Bd], doc="gradient of Threshold's output")
spec.input("self", T, [Bd], doc="Threshold's input")
spec.attr("threshold", float, 0.0, doc="the threshold (0: Relu's gradient)")
spec.output("out", T, [Bd])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "activation")


@spec.body
def _(b, gradOutput, self, threshold):
    return {"out": b.where(self > threshold, gradOutput, 0.0)}
