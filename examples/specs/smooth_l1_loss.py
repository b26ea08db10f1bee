"""SmoothL1Loss (aclnnSmoothL1Loss) with reduction "none": d = self - target,
out = 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (beta > 0; beta = 0 is the L1 loss |d|: the
comparison never holds).

Rows of the last axis H; the comparison with the attribute is a CompareScalar, the choice a Select of two rows.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("SmoothL1Loss", aclnn="aclnnSmoothL1Loss", socs=(A2, A3), round="rint",
              doc="Smooth L1 (Huber-like) loss per element.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H")
(T,) = spec.dtype_vars("T")

spec.input("self", T, [Bd, H])
spec.input("target", T, [Bd, H])
spec.attr("beta", float, 1.0, doc="where the loss turns from quadratic to linear (>= 0)")
spec.output("out", T, [Bd, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "loss")


@spec.body
def _(b, self, target, beta):
    d = self - target
    ad = b.abs(d)
    return {"out": b.where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta)}
