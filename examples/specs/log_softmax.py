"""LogSoftmaxV2 (aclnnLogSoftmax) over the last axis: y = z - log(sum(exp(z))) with z = x - max(x).

The per-row sum is broadcast to the row before its log (the AIV scalar unit has no log: a Duplicate, then Ln).
Rows up to 2^20 columns: a core's slice longer than UB is streamed (COL_STREAM).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("LogSoftmaxV2", aclnn="aclnnLogSoftmax", socs=(A2, A3), round="rint",
              doc="Log of the softmax over the last axis.")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=1048576)
(T,) = spec.dtype_vars("T")
spec.input("x", T, [Bd, H])
spec.output("y", T, [Bd, H])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "activation")


@spec.body
def _(b, x):
    z = x - x.max(-1)
    s = b.exp(z).sum(-1).broadcast_to([Bd, H])
    return {"y": z - b.log(s)}
