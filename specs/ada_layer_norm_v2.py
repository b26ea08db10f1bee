"""AdaLayerNormV2 (aclnnAdaLayerNormV2): out = LayerNorm(x) * (1 + scale) + shift, with mean/rstd.

Facts: docs/reference/ada_layer_norm.md §1.1 (math: centred two-pass biased variance,
rstd = 1/sqrt(var + eps)), §1.3 (fp32 inside; out, mean and rstd narrowed to T with CAST_RINT),
§1.5 (shapes; scale and shift each [Bd..., H] or [Bd..., 1, H]), §1.6 (V2's five dtype combinations),
§2.2 (epsilon default 1e-5).
"""

from opgen.dsl import A2, A3, OpSpec, Prod, api, bf16, f16, f32

spec = OpSpec("AdaLayerNormV2", aclnn="aclnnAdaLayerNormV2", socs=(A2, A3), round="rint",
              doc="Adaptive LayerNorm forward that also outputs the per-row mean and rstd.",
              source="the forward formulas of CANN's aclnnAdaLayerNormV2 (ops-nn norm/ada_layer_norm_v2)")
Bd = spec.variadic("Bd", max_rank=6)
S = spec.dim("S")
H = spec.dim("H", max=131073)  # the UB plans are proven up to this bound (opgen.tiling.ub_proof)
T, U = spec.dtype_vars("T U")

spec.input("x", T, [Bd, S, H])
spec.input("scale", T, [[Bd, H], [Bd, 1, H]])
spec.input("shift", T, [[Bd, H], [Bd, 1, H]])
spec.input("weight", U, [H], optional=True)
spec.input("bias", U, [H], optional=True)
spec.attr("epsilon", float, 1e-5, doc="added to the variance")

spec.output("out", T, [Bd, S, H])
spec.output("mean", T, [Bd, S, 1])
spec.output("rstd", T, [Bd, S, 1])

spec.dtypes((T, U), [(f32, f32), (f16, f16), (f16, f32), (bf16, bf16), (bf16, f32)])


spec.package("ops-nn", "norm")  # docs/reference/ops_package.md §1: ops-nn norm/ada_layer_norm_v2
spec.modifies("norm/ada_layer_norm",
              "ops-nn's AdaLayerNorm package also registers AdaLayerNormV2's tiling (IMPL_OP_OPTILING(AdaLayerNormV2) "
              "in op_host/ada_layer_norm_tiling.cpp, REGISTER_TILING_DATA_CLASS(AdaLayerNormV2, ...) in "
              "op_host/ada_layer_norm_tiling.h), because CANN's AdaLayerNormV2 has no tiling of its own. This "
              "package brings its own, so delete those two registrations there, or AdaLayerNormV2's tiling is "
              "registered twice.")
spec.example_call({"Bd": (2,), "S": 4, "H": 8})
# CANN's public signature (docs/reference/ada_layer_norm.md §2.2): mean and rstd outputs may be null.
spec.aclnn_signature(
    api.param("x"), api.param("scale"), api.param("shift"), api.param("weightOptional", "weight"),
    api.param("biasOptional", "bias"), api.param("epsilon"), api.param("out"),
    api.param("meanOutOptional", "mean", optional=True), api.param("rstdOutOptional", "rstd", optional=True))

@spec.body
def _(b, x, scale, shift, weight, bias, epsilon):
    B = Prod("Bd")
    x = x.reshape([B, S, H])
    mean = x.mean(-1)
    xc = x - mean
    var = (xc * xc).mean(-1)
    rstd = b.rsqrt(var + epsilon)
    y = xc * rstd
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    out = y * (scale.reshape([B, 1, H]) + 1.0) + shift.reshape([B, 1, H])
    return {
        "out": out.reshape([Bd, S, H]),
        "mean": mean.reshape([Bd, S, 1]),
        "rstd": rstd.reshape([Bd, S, 1]),
    }

# docs/reference/ada_layer_norm.md: the shape checks run before the empty-tensor branch
spec.empty_tensors("reject", "CANN's aclnnAdaLayerNormV2 rejects a zero B, S or H with 161002")
