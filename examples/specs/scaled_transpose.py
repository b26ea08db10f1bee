"""ScaledTranspose: y = transpose(x, BSND -> BNSD) * scale, e.g. queries turned head-major with the softmax scale.

The permute of the leading axes is GM addressing: the kernel walks y's rows in order and reads each run of x's
rows along S at x's head stride, so nothing is copied twice.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("ScaledTranspose", aclnn="aclnnScaledTranspose", socs=(A2, A3), round="rint",
              doc="BSND -> BNSD transpose with a scale.")
B, S, N = spec.dims("B S N")
D = spec.dim("D", max=16384)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [B, S, N, D])
spec.attr("scale", float, 1.0)
spec.output("y", T, [B, N, S, D])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


@spec.body
def _(b, x, scale):
    return {"y": x.permute(0, 2, 1, 3) * scale}
