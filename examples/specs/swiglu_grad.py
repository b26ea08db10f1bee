"""SwiGluGrad (aclnnSwiGluGrad): the gradient of y = silu(a) * g where x = a | g along the last axis.

With s = sigmoid(a) = 1 / (1 + exp(-a)): da = dy * g * s * (1 + a * (1 - s)) and dg = dy * a * s; the gradient
of x is the concat da | dg along the last axis, written as two column windows of dx's rows.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("SwiGluGrad", aclnn="aclnnSwiGluGrad", socs=(A2, A3), round="rint",
              doc="Backward of SwiGlu over the two halves of the last axis.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=32768)
(T,) = spec.dtype_vars("T")

spec.input("gradOut", T, [Bd, H])
spec.input("self", T, [Bd, 2 * H])
spec.attr("dim", int, -1, choices=(-1,), static=True, doc="the split axis: the last one")
spec.output("out", T, [Bd, 2 * H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


spec.package("ops-nn", "activation")  # where the package goes: ops-nn activation/<op_snake>


@spec.body
def _(b, gradOut, self, dim):
    a, g = self.slice(-1, 0, H), self.slice(-1, H, 2 * H)
    s = 1.0 / (1.0 + b.exp(-a))
    da = gradOut * g * s * (1.0 + a * (1.0 - s))
    dg = gradOut * a * s
    return {"out": b.concat([da, dg], -1)}
