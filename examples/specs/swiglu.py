"""SwiGlu (aclnnSwiGlu): the last axis of x holds two halves a | g; y = silu(a) * g = a / (1 + exp(-a)) * g.

x is [*Bd, 2 * H]: H is bound from x's last dim (which must be even); the halves are read as two column windows
of x's rows, not copied.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("SwiGlu", aclnn="aclnnSwiGlu", socs=(A2, A3), round="rint",
              doc="Swish-gated linear unit over the two halves of the last axis.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=65536)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [Bd, 2 * H])
spec.attr("dim", int, -1, choices=(-1,), static=True, doc="the split axis: the last one")
spec.output("y", T, [Bd, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


spec.package("ops-nn", "activation")  # where the package goes: ops-nn activation/<op_snake>


@spec.body
def _(b, x, dim):
    a = x.slice(-1, 0, H)
    g = x.slice(-1, H, 2 * H)
    return {"y": a / (1.0 + b.exp(-a)) * g}
