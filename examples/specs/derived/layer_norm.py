"""LayerNormV4 (aclnnLayerNorm) over the last axis with weight and bias: y = (x - mean) * rstd * gamma + beta,
rstd = 1 / sqrt(var + epsilon) with the biased variance; mean and rstd are outputs in fp32 [*Bd, 1].

The forward of the derived LayerNormGrad (layer_norm_grad.py here).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("LayerNormV4", aclnn="aclnnLayerNorm", socs=(A2, A3), round="rint",
              doc="Layer normalisation over the last axis with an affine weight and bias.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=16384)
T, U = spec.dtype_vars("T U")

spec.input("x", T, [Bd, H])
spec.input("gamma", U, [H])
spec.input("beta", U, [H])
spec.attr("epsilon", float, 1e-5, doc="added to the variance")
spec.output("y", T, [Bd, H])
spec.output("mean", f32, [Bd, 1])
spec.output("rstd", f32, [Bd, 1])
spec.dtypes((T, U), [(f32, f32), (f16, f16), (f16, f32), (bf16, bf16), (bf16, f32)])


spec.package("ops-nn", "norm")  # where the package goes: ops-nn norm/<op_snake>


@spec.body
def _(b, x, gamma, beta, epsilon):
    mean = x.mean(-1)
    xc = x - mean
    rstd = b.rsqrt((xc * xc).mean(-1) + epsilon)
    return {"y": xc * rstd * gamma + beta, "mean": mean, "rstd": rstd}
