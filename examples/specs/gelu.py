"""Gelu (aclnnGelu), tanh approximation, on a tensor of any rank (0 to 8 dims):
y = x / (1 + exp(-sqrt(8 / pi) * (x + 0.044715 x^3))), which is 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).

Pure elementwise: the kernel sees the whole tensor as one run of elements split over the cores.
"""

import math

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("Gelu", aclnn="aclnnGelu", socs=(A2, A3), round="rint",
              doc="Gaussian error linear unit, tanh approximation.")
Bd = spec.variadic("Bd", max_rank=8)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [Bd])
spec.output("out", T, [Bd])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])

K = math.sqrt(8.0 / math.pi)


spec.package("ops-nn", "activation")  # where the package goes: ops-nn activation/<op_snake>


@spec.body
def _(b, self):
    x = self
    return {"out": x / (1.0 + b.exp(-K * (x + 0.044715 * x * x * x)))}
