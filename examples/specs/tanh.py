"""Tanh (aclnnTanh): out = tanh(self), elementwise.

`b.tanh` computes as AscendC's Tanh does on Atlas A2 / A3 (docs/reference/ascendc.md §1.9): self clipped to
[-8.8, 8.8], t = exp(2 self), out = (t - 1) / (t + 1) in fp32 — the rows family emits those vector steps (Mins, Maxs,
Muls, Exp, Adds, Div), and the interpreter's device mode takes the same ones. About 1e-7 absolute error in fp32
(so a larger relative one for |self| near 0); exactly +-1 past the clip.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("Tanh", aclnn="aclnnTanh", socs=(A2, A3), round="rint", doc="Hyperbolic tangent.")
Bd = spec.variadic("Bd", max_rank=8)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [Bd])
spec.output("out", T, [Bd])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "activation")


@spec.body
def _(b, self):
    return {"out": b.tanh(self)}
