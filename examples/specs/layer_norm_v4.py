"""LayerNormV4 (aclnnLayerNorm) over the two trailing axes of [*Bd, S, H] (normalizedShape = [S, H]): per leading
index b, over its S x H elements, mean = E[x], rstd = 1 / sqrt(E[(x - mean)^2] + epsilon),
y = (x - mean) * rstd * gamma + beta with gamma, beta of shape [S, H], each optional as in aclnnLayerNorm
(weightOptional / biasOptional: an absent gamma multiplies by one, an absent beta adds zero); mean and rstd are
[*Bd, 1, 1] in fp32 (LayerNormV4's OpDef declares them float).

opgen merges the two normalised axes into one row of S * H elements per b (any number of leading dims, none
included) (opgen.kernel.rowmerge): gamma and beta become one column row of S * H. The aclnn layer takes
normalizedShape as CANN does and checks that it equals [S, H] (this spec fixes the normalised axes to the last two).
One kernel class serves the four presences of gamma and beta (docs/design.md "Optional inputs: one class for every
presence").
"""

from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32

spec = OpSpec("LayerNormV4", aclnn="aclnnLayerNorm", socs=(A2, A3), round="rint",
              doc="Layer normalisation over the last two axes.")
Bd = spec.variadic("Bd", max_rank=6)
S = spec.dim("S", max=8192)
H = spec.dim("H", max=8192)
# one row of S * H elements is split over the cores, a core's slice streamed when it outgrows UB
spec.require(S * H <= 1048576, "x", "S * H must be at most 1048576 (the longest row the kernel takes)")
T, U = spec.dtype_vars("T U")

spec.input("x", T, [Bd, S, H])
spec.input("gamma", U, [S, H], optional=True, doc="weight; ones when absent")
spec.input("beta", U, [S, H], optional=True, doc="bias; zeros when absent")
spec.attr("epsilon", float, 1e-5, doc="added to the variance")
spec.output("y", T, [Bd, S, H])
spec.output("mean", f32, [Bd, 1, 1])
spec.output("rstd", f32, [Bd, 1, 1])
spec.dtypes((T, U), [(f32, f32), (f16, f32), (f16, f16), (bf16, f32), (bf16, bf16)])
spec.aclnn_signature(
    api.param("input", "x"), api.int_array("normalizedShape", [S, H]), api.param("weightOptional", "gamma"),
    api.param("biasOptional", "beta"), api.param("eps", "epsilon"), api.param("out", "y"),
    api.param("meanOutOptional", "mean", optional=True), api.param("rstdOutOptional", "rstd", optional=True))

spec.package("ops-nn", "norm")  # where the package goes: ops-nn norm/<op_snake>


@spec.body
def _(b, x, gamma, beta, epsilon):
    xf = x.f32()
    mean = xf.mean((-2, -1))
    d = xf - mean
    rstd = b.rsqrt((d * d).mean((-2, -1)) + epsilon)
    y = d * rstd
    if gamma is not None:
        y = y * gamma.f32()
    if beta is not None:
        y = y + beta.f32()
    return {"y": y.cast(T, "rint"), "mean": mean, "rstd": rstd}
