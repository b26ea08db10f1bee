"""RmsNormGrad (aclnnRmsNormGrad): gradients of y = x * rstd * gamma given the saved per-row rstd.

dx = rstd * (dy * gamma - x * rstd^2 * mean(dy * gamma * x)), dgamma = sum over every row of dy * x * rstd
(fp32, as CANN's RmsNormGrad writes it). A row reduction and a reduction over all leading axes in one kernel.
"""

from opgen.dsl import A2, A3, OpSpec, Prod, bf16, f16, f32

spec = OpSpec("RmsNormGrad", aclnn="aclnnRmsNormGrad", socs=(A2, A3), round="rint",
              doc="Backward of RmsNorm with the saved rstd.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=32768)
(T,) = spec.dtype_vars("T")

spec.input("dy", T, [Bd, H])
spec.input("x", T, [Bd, H])
spec.input("rstd", f32, [Bd, 1], doc="saved 1 / sqrt(mean(x^2) + epsilon)")
spec.input("gamma", T, [H])
spec.output("dx", T, [Bd, H])
spec.output("dgamma", f32, [H], doc="sum over all rows")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


spec.package("ops-nn", "norm")  # where the package goes: ops-nn norm/<op_snake>


@spec.body
def _(b, dy, x, rstd, gamma):
    g = dy * gamma
    dx = rstd * (g - x * (rstd * rstd) * (g * x).mean(-1))
    return {"dx": dx, "dgamma": (dy * x * rstd).reshape([Prod("Bd"), H]).sum(0, keepdims=False)}


@spec.example
def _(rng, inputs, env, attrs):
    """rstd as RmsNorm saved it for the generated x (epsilon 1e-6)."""
    import numpy as np

    x = inputs["x"].astype(np.float64)
    inputs["rstd"] = (1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)).astype(np.float32)
