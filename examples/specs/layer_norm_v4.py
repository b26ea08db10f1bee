"""LayerNormV4 (aclnnLayerNorm) over the two trailing axes of [*Bd, S, H] (normalizedShape = [S, H]): per leading
index b, over its S x H elements, mean = E[x], rstd = 1 / sqrt(E[(x - mean)^2] + epsilon), y = (x - mean) * rstd * gamma + beta
with gamma, beta of shape [S, H]; mean and rstd are [*Bd, 1, 1] in fp32 (LayerNormV4's OpDef declares them float).

opgen merges the two normalised axes into one row of S * H elements per b (any number of leading dims, none included) (opgen.kernel.rowmerge): gamma and beta
become one column row of S * H. Not declared here: the normalised axes as a runtime input (`normalized_shape`:
this spec fixes them to the last two), gamma and beta absent.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("LayerNormV4", aclnn="aclnnLayerNorm", socs=(A2, A3), round="rint",
              doc="Layer normalisation over the last two axes.")
Bd = spec.variadic("Bd", max_rank=6)
S = spec.dim("S", max=8192)
H = spec.dim("H", max=8192)
# one row of S * H elements is split over the cores, a core's slice streamed when it outgrows UB
spec.require(S * H <= 1048576, "x", "S * H must be at most 1048576 (the longest row the kernel takes)")
T, U = spec.dtype_vars("T U")

spec.input("x", T, [Bd, S, H])
spec.input("gamma", U, [S, H])
spec.input("beta", U, [S, H])
spec.attr("epsilon", float, 1e-5, doc="added to the variance")
spec.output("y", T, [Bd, S, H])
spec.output("mean", f32, [Bd, 1, 1])
spec.output("rstd", f32, [Bd, 1, 1])
spec.dtypes((T, U), [(f32, f32), (f16, f32), (f16, f16), (bf16, f32), (bf16, bf16)])


spec.package("ops-nn", "norm")  # where the package goes: ops-nn norm/<op_snake>


@spec.body
def _(b, x, gamma, beta, epsilon):
    xf = x.f32()
    mean = xf.mean((-2, -1))
    d = xf - mean
    rstd = b.rsqrt((d * d).mean((-2, -1)) + epsilon)
    return {"y": (d * rstd * gamma.f32() + beta.f32()).cast(T, "rint"), "mean": mean, "rstd": rstd}
