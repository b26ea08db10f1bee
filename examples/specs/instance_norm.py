"""InstanceNorm (aclnnInstanceNorm) on NCHW: per (n, c), over the H x W elements of that channel,
mean = E[x], variance = E[(x - mean)^2] (biased), y = (x - mean) / sqrt(variance + eps) * gamma[c] + beta[c].
mean and variance are [N, C, 1, 1] in x's dtype, as aclnnInstanceNorm declares them.

A reduction over two trailing axes (H, W): opgen merges them into one row of H * W elements per (n, c)
(opgen.kernel.rowmerge); gamma and beta are indexed by the row's channel coordinate, a leading axis of the rows,
so each row reads its own element of them (a per-row value). Not declared here: dataFormat "NHWC" (the channel
innermost: statistics over a strided set of elements).
"""

from opgen.dsl import A2, A3, OpSpec, f16, f32

spec = OpSpec("InstanceNorm", aclnn="aclnnInstanceNorm", socs=(A2, A3), round="rint",
              doc="Instance normalisation of NCHW input: statistics per sample and channel.")
N = spec.dim("N", max=1 << 20)
C = spec.dim("C", max=65536)
H = spec.dim("H", max=8192)
W = spec.dim("W", max=8192)
# one row of H * W elements is split over the cores, a core's slice streamed when it outgrows UB
spec.require(H * W <= 1048576, "x", "H * W must be at most 1048576 (the longest row the kernel takes)")
(T,) = spec.dtype_vars("T")

spec.input("x", T, [N, C, H, W])
spec.input("gamma", T, [C])
spec.input("beta", T, [C])
spec.attr("dataFormat", str, "NCHW", choices=("NCHW",), static=True, doc="the layout of x (NCHW only here)")
spec.attr("eps", float, 1e-5, doc="added to the variance")
spec.output("y", T, [N, C, H, W])
spec.output("mean", T, [N, C, 1, 1], doc="E[x] per sample and channel")
spec.output("variance", T, [N, C, 1, 1], doc="the biased variance per sample and channel")
spec.dtypes((T,), [(f32,), (f16,)])


spec.package("ops-nn", "norm")  # where the package goes: ops-nn norm/<op_snake>


@spec.body
def _(b, x, gamma, beta, dataFormat, eps):
    xf = x.f32()
    mean = xf.mean((2, 3))
    d = xf - mean
    var = (d * d).mean((2, 3))
    scale = gamma.f32().reshape([C, 1, 1])
    shift = beta.f32().reshape([C, 1, 1])
    y = d * b.rsqrt(var + eps) * scale + shift
    return {"y": y.cast(T, "rint"), "mean": mean.cast(T, "rint"), "variance": var.cast(T, "rint")}
