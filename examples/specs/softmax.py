"""SoftmaxV2 (aclnnSoftmax) over the last axis: y = exp(x - max(x)) / sum(exp(x - max(x))).

Two row reductions of two levels (the maximum, then the sum of the shifted exponentials); rows longer than UB
are split over the cores with the partial maxima and sums exchanged through workspace, and a core's slice longer
than UB is streamed (COL_STREAM: x read twice, once for the online maximum and sum, once for y).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("SoftmaxV2", aclnn="aclnnSoftmax", socs=(A2, A3), round="rint",
              doc="Softmax over the last axis.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=1048576)
(T,) = spec.dtype_vars("T")

spec.input("x", T, [Bd, H])
spec.attr("dim", int, -1, choices=(-1,), static=True, doc="the reduced axis: opgen's kernel takes the last one")
spec.output("y", T, [Bd, H])
spec.dtypes((T,), [(f16,), (bf16,), (f32,)])


spec.package("ops-nn", "activation")  # where the package goes: ops-nn activation/<op_snake>


@spec.body
def _(b, x, dim):
    e = b.exp(x - x.max(-1))
    return {"y": e / e.sum(-1)}
