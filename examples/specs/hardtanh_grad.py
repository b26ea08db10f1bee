"""HardtanhGrad (aclnnHardtanhBackward): out = 0 where self <= minVal or self >= maxVal, gradOutput elsewhere (a NaN
in self passes the gradient, as ops-nn's kernel and ATen's scalar definition do).

Two comparisons with the attributes combined as masks (`|`: AscendC Or on the bit masks), then a Select.
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32

spec = OpSpec("HardtanhGrad", aclnn="aclnnHardtanhBackward", socs=(A2, A3), round="rint",
              doc="Gradient of Hardtanh: the incoming gradient inside (minVal, maxVal).")
Bd = spec.variadic("Bd", max_rank=8)
(T,) = spec.dtype_vars("T")

spec.input("gradOutput", T, [Bd], doc="gradient of Hardtanh's output")
spec.input("self", T, [Bd], doc="Hardtanh's input")
spec.attr("minVal", float, -1.0, doc="lower end of the linear range")
spec.attr("maxVal", float, 1.0, doc="upper end of the linear range")
spec.output("out", T, [Bd])
# CANN's API: aclnnHardtanhBackward(gradOutput, self, const aclScalar* min, const aclScalar* max, out)
spec.aclnn_signature(api.param("gradOutput"), api.param("self"), api.scalar("min", "minVal"),
                     api.scalar("max", "maxVal"), api.param("out"))
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "activation")


@spec.body
def _(b, gradOutput, self, minVal, maxVal):
    outside = (self <= minVal) | (self >= maxVal)
    return {"out": b.where(outside, 0.0, gradOutput)}


@spec.example
def _(rng, inputs, env, attrs):
    """NaN and infinities among the inputs of Hardtanh (their gradients are defined)."""
    import numpy as np

    flat = inputs["self"].reshape(-1)
    flat[::7] = np.nan
    flat[3::11] = np.inf
    flat[5::13] = -np.inf
