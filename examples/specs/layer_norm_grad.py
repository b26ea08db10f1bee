"""LayerNormGradV3 (aclnnLayerNormBackward): input, weight and bias gradients of LayerNorm with saved mean/rstd.

z = (x - mean) * rstd, g = dy * gamma: dx = rstd * (g - mean(g) - z * mean(g * z)); dgamma = sum of dy * z and
dbeta = sum of dy over every row. Two row reductions of one level and two column sums; T/U dtype rows (the
weights may be fp32 beside fp16/bf16 data).

The public API follows CANN's aclnnLayerNormBackward where the kernel allows: its names, mean before rstd (the
OpDef takes rstd first), normalizedShape checked against H, a bias accepted (it does not enter the gradients) and
validated like gamma. Unlike CANN's, weightOptional is required and there is no outputMask (all three gradients
are always computed).
"""

from opgen.dsl import A2, A3, OpSpec, Prod, api, bf16, f16, f32

spec = OpSpec("LayerNormGradV3", aclnn="aclnnLayerNormBackward", socs=(A2, A3), round="rint",
              doc="Backward of LayerNorm over the last axis.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=16384)
T, U = spec.dtype_vars("T U")

spec.input("dy", T, [Bd, H])
spec.input("x", T, [Bd, H])
spec.input("rstd", f32, [Bd, 1])
spec.input("mean", f32, [Bd, 1])
spec.input("gamma", U, [H])
spec.output("pd_x", T, [Bd, H])
spec.output("pd_gamma", U, [H])
spec.output("pd_beta", U, [H])
spec.dtypes((T, U), [(f32, f32), (f16, f16), (f16, f32), (bf16, bf16), (bf16, f32)])
spec.aclnn_signature(
    api.param("gradOut", "dy"), api.param("input", "x"), api.int_array("normalizedShape", [H]), api.param("mean"),
    api.param("rstd"), api.param("weight", "gamma"), api.unused("biasOptional", like="gamma", optional=True),
    api.param("gradInputOut", "pd_x"), api.param("gradWeightOut", "pd_gamma"), api.param("gradBiasOut", "pd_beta"))
spec.aclnn_note("Differs from CANN's aclnnLayerNormBackward: weight is required and there is no outputMask.")


spec.package("ops-nn", "norm")  # where the package goes: ops-nn norm/<op_snake>


@spec.body
def _(b, dy, x, rstd, mean, gamma):
    z = (x - mean) * rstd
    g = dy * gamma
    dx = rstd * (g - g.mean(-1) - z * (g * z).mean(-1))
    return {"pd_x": dx, "pd_gamma": _rows_sum(dy * z), "pd_beta": _rows_sum(dy)}


def _rows_sum(v):
    """Sum over every row (all leading axes) to [H]."""
    return v.reshape([Prod("Bd"), H]).sum(0, keepdims=False)


@spec.example
def _(rng, inputs, env, attrs):
    """mean and rstd of the generated x, as the forward saved them (eps 1e-5)."""
    import numpy as np

    x = inputs["x"].astype(np.float64)
    m = x.mean(-1, keepdims=True)
    inputs["mean"] = m.astype(np.float32)
    inputs["rstd"] = (1.0 / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)).astype(np.float32)
