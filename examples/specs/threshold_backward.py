"""ThresholdGradV2D (aclnnThresholdBackward, the gradient of Threshold and of Relu at threshold 0):
out = 0 where self <= threshold, gradOutput elsewhere (a NaN in self passes the gradient, as ATen's
threshold_backward and ops-nn's kernel do).

The comparison with the attribute is a CompareScalar; the choice a Select (the zero broadcast first).
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32

spec = OpSpec("ThresholdGradV2D", aclnn="aclnnThresholdBackward", socs=(A2, A3), round="rint",
              doc="Gradient of Threshold: the incoming gradient where the input exceeded the threshold.")
Bd = spec.variadic("Bd", max_rank=8)
(T,) = spec.dtype_vars("T")

spec.input("gradOutput", T, [Bd], doc="gradient of Threshold's output")
spec.input("self", T, [Bd], doc="Threshold's input")
spec.attr("threshold", float, 0.0, doc="the threshold (0: Relu's gradient)")
spec.output("out", T, [Bd])
# CANN's API: aclnnThresholdBackward(gradOutput, self, const aclScalar* threshold, out)
spec.aclnn_signature(api.param("gradOutput"), api.param("self"), api.scalar("threshold"), api.param("out"))
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "activation")


@spec.body
def _(b, gradOutput, self, threshold):
    return {"out": b.where(self <= threshold, 0.0, gradOutput)}


@spec.example
def _(rng, inputs, env, attrs):
    """NaN and infinities among the inputs of Threshold (their gradients are defined)."""
    import numpy as np

    flat = inputs["self"].reshape(-1)
    flat[::7] = np.nan
    flat[3::11] = np.inf
    flat[5::13] = -np.inf
