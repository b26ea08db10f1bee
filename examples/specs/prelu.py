"""Prelu (aclnnPrelu) in its 2-D form: self [N, C], one learnt slope per channel weight [C]:
out = self where self > 0, weight * self elsewhere.

Rows of the C channels: the weight is a column row read once per core, the comparison a CompareScalar of each row
against 0, the choice a Select of two rows.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("Prelu", aclnn="aclnnPrelu", socs=(A2, A3), round="rint",
              doc="Parametric rectified linear unit, a slope per channel.")
N, C = spec.dim("N"), spec.dim("C")
(T,) = spec.dtype_vars("T")

spec.input("self", T, [N, C])
spec.input("weight", T, [C], doc="slope of each channel for self <= 0")
spec.output("out", T, [N, C])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "activation")


@spec.body
def _(b, self, weight):
    return {"out": b.where(self > 0.0, self, self * weight)}
