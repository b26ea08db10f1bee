"""SwiGlu (aclnnSwiGlu): the axis `dim` of x holds two halves a | g; y = silu(a) * g = a / (1 + exp(-a)) * g.

dim -1: x [*Bd, 2 * H], the halves are two column windows of each row; dim 0: x [2 * H, *Bd], the halves are the
first and the last H rows of the trailing dims; dim 1: x [A, 2 * H, *Bd], each of the A blocks halved. H is bound
from the halved axis (which must be even). The attribute picks the shapes (`form_by`), and each value lowers on its
own row domain (rows of H for dim -1, rows of prod(Bd) otherwise), chosen at run time by the tiling key. Halves
are read in place, never copied.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("SwiGlu", aclnn="aclnnSwiGlu", socs=(A2, A3), round="rint",
              doc="Swish-gated linear unit over the two halves of axis dim.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=65536)
A = spec.dim("A", max=65536)
(T,) = spec.dtype_vars("T")

spec.attr("dim", int, -1, choices=(-1, 0, 1), static=True, doc="the halved axis: the last, the first or the second")
spec.input("x", T, {-1: [Bd, 2 * H], 0: [2 * H, Bd], 1: [A, 2 * H, Bd]}, form_by="dim")
spec.output("y", T, {-1: [Bd, H], 0: [H, Bd], 1: [A, H, Bd]}, form_by="dim")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


spec.package("ops-nn", "activation")  # where the package goes: ops-nn activation/<op_snake>


@spec.body
def _(b, x, dim):
    a = x.slice(dim, 0, H)
    g = x.slice(dim, H, 2 * H)
    return {"y": a / (1.0 + b.exp(-a)) * g}
