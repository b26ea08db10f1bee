"""AdaLayerNormGrad (aclnnAdaLayerNormBackward): gradients of AdaLayerNorm(V2).

Facts: docs/reference/ada_layer_norm.md §1.2 (formulas), §1.3 (fp32 inside, CAST_RINT outputs),
§1.4 (mean/rstd fp32 [Bd..., S, 1] at the kernel op), §1.5 (scale [Bd..., H] or [Bd..., 1, H];
pd_scale/pd_shift take scale's shape), §1.6 (the five dtype combinations), §2.4 (infershape).
Absent gamma/beta mean ones/zeros (§2.3 step 3).
"""

from opgen.dsl import A2, A3, OpSpec, Prod, api, bf16, f16, f32

spec = OpSpec("AdaLayerNormGrad", aclnn="aclnnAdaLayerNormBackward", socs=(A2, A3), round="rint",
              doc="Backward of out = LayerNorm(x) * (1 + scale) + shift with saved per-row mean/rstd.",
              source="the backward formulas of CANN's aclnnAdaLayerNormBackward (ops-nn norm/ada_layer_norm_grad)")
Bd = spec.variadic("Bd", max_rank=6)
S = spec.dim("S")
H = spec.dim("H", max=65536)  # the UB plans are proven up to this bound (opgen.tiling.ub_proof)
T, U = spec.dtype_vars("T U")

spec.input("dy", T, [Bd, S, H], doc="gradient of out (gradOut)")
spec.input("x", T, [Bd, S, H], doc="forward input")
spec.input("rstd", f32, [Bd, S, 1], doc="saved 1/sqrt(var + eps) per row")
spec.input("mean", f32, [Bd, S, 1], doc="saved mean per row")
spec.input("scale", T, [[Bd, H], [Bd, 1, H]], doc="adaptive scale per batch row")
spec.input("gamma", U, [H], optional=True, doc="LayerNorm weight; absent = ones")
spec.input("beta", U, [H], optional=True, doc="LayerNorm bias; absent = zeros")

spec.output("pd_x", T, [Bd, S, H], doc="gradInputOut")
spec.output("pd_scale", T, like="scale", doc="gradScaleOut: sum over S")
spec.output("pd_shift", T, like="scale", doc="gradShiftOut: sum over S, scale's shape (infershape)")
spec.output("pd_gamma", U, [H], doc="gradWeightOut: sum over all rows")
spec.output("pd_beta", U, [H], doc="gradBiasOut: sum over all rows")

spec.dtypes((T, U), [(f32, f32), (f16, f16), (f16, f32), (bf16, bf16), (bf16, f32)])


spec.package("ops-nn", "norm")  # docs/reference/ops_package.md §1: ops-nn norm/ada_layer_norm_grad
spec.example_call({"Bd": (2,), "S": 4, "H": 8})
# CANN's public signature (docs/reference/ada_layer_norm.md §2.3): its own order and names, normalizedShape, rstd/mean
# in gradOut's dtype (cast to the kernel's fp32, §1.4), and shift, accepted and checked but never read.
spec.aclnn_signature(
    api.param("gradOut", "dy"), api.param("input", "x"), api.int_array("normalizedShape", [H]),
    api.param("rstd", dtype=T), api.param("mean", dtype=T), api.param("scale"), api.unused("shift", like="scale"),
    api.param("weightOptional", "gamma"), api.param("biasOptional", "beta"),
    api.param("gradInputOut", "pd_x"), api.param("gradScaleOut", "pd_scale"), api.param("gradShiftOut", "pd_shift"),
    api.param("gradWeightOut", "pd_gamma"), api.param("gradBiasOut", "pd_beta"))
spec.opdef_note("Deliberate difference from CANN's def (ops-nn norm/ada_layer_norm_grad/op_host): gamma and beta are OPTIONAL, "
                "not REQUIRED. CANN's aclnn layer fills absent ones (ones/zeros) before the launch; this kernel "
                "treats an absent gamma as ones and beta as zeros itself, so no fill runs and a graph that passes "
                "both still matches.")
spec.aclnn_note("Stricter than CANN's aclnnAdaLayerNormBackward: all five gradient outputs are required "
                "(CANN documents them as optional, does nothing when all five are null and dereferences a null "
                "gradInputOut, gradScaleOut or gradShiftOut); weightOptional and biasOptional must be [H] (CANN "
                "checks only their rank); gradWeightOut and gradBiasOut must be [H] (CANN accepts any shape of H "
                "elements); every SoC other than the spec's is rejected with 361001 (CANN returns success without "
                "computing).")

@spec.body
def _(b, dy, x, rstd, mean, scale, gamma, beta):
    B = Prod("Bd")
    dy = dy.reshape([B, S, H])
    x = x.reshape([B, S, H])
    rstd = rstd.reshape([B, S, 1])
    mean = mean.reshape([B, S, 1])
    scale_shape = scale.shape
    s1 = scale.reshape([B, 1, H]) + 1.0           # (1 + scale), formed in fp32
    z = (x - mean) * rstd                         # normalised input
    dy_s = dy * s1
    g = dy_s if gamma is None else dy_s * gamma   # dy_g
    pd_x = rstd * (g - g.mean(-1) - z * (g * z).mean(-1))
    zg = z if gamma is None else z * gamma
    pd_scale = (dy * (zg if beta is None else zg + beta)).sum(1)
    pd_shift = dy.sum(1)
    return {
        "pd_x": pd_x.reshape([Bd, S, H]),
        "pd_scale": pd_scale.reshape(scale_shape),
        "pd_shift": pd_shift.reshape(scale_shape),
        "pd_gamma": (dy_s * z).sum((0, 1), keepdims=False),
        "pd_beta": dy_s.sum((0, 1), keepdims=False),
    }


@spec.example
def _(rng, inputs, env, attrs):
    """Statistics of the generated x, as the forward would have saved them (fp32)."""
    import numpy as np

    x = inputs["x"].astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    inputs["mean"] = mean.astype(np.float32)
    inputs["rstd"] = (1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)).astype(np.float32)

# docs/reference/ada_layer_norm.md: the shape checks run before the empty-tensor branch
spec.empty_tensors("reject", "CANN's aclnnAdaLayerNormBackward rejects a zero B, S or H with 161002")
