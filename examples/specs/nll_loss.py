"""NLLLoss (aclnnNLLLoss) with class-index targets and reduction 'sum': from log-probabilities self [N, C],
out = -sum_n weight[target[n]] * self[n, target[n]] and totalWeight = sum_n weight[target[n]], both over the rows
whose target is not ignoreIndex (0-d outputs).

Each row's term is a gather along the row by its int64 target (checked 0 <= target < C on the device: Trap()
otherwise), and the two sums over the rows are reductions of per-row values to one element (each core's rows
summed in lane 0 of a column row, the cores' partials added in core order). Not declared here: reduction 'none'
(an [N] output) and 'mean' (out / totalWeight: the rows family finishes one reduction at a time). ignoreIndex is
CANN's int64, read by the kernel as fp32 (exact while C <= 2^24: docs/design.md "Rows family: integer attributes").
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i64
from opgen.dsl.checks import index_in_range

spec = OpSpec("NLLLoss", aclnn="aclnnNLLLoss", socs=(A2, A3), round="rint",
              doc="Negative log-likelihood of class-index targets, summed over the rows.")
N = spec.dim("N")
C = spec.dim("C", max=131072)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [N, C])
spec.input("target", i64, [N])
spec.input("weight", T, [C])
spec.attr("ignoreIndex", int, -100, doc="a target value whose row counts nothing (an integer)")
spec.output("out", T, [])
spec.output("totalWeight", T, [])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "loss")


spec.check("target", index_in_range("target", "C", ignore="ignoreIndex"), on="device")   # device data: the kernel traps


@spec.body
def _(b, self, target, weight, ignoreIndex):
    keep = target.ne(ignoreIndex).cast(i64)
    t = target * keep                       # an ignored row reads class 0, then counts 0
    w = b.gather(weight.f32(), t, axis=0) * keep.f32()
    loss = -(b.gather(self.f32(), t, axis=1) * w)
    return {"out": loss.sum(0, keepdims=False).cast(T, "rint"),
            "totalWeight": w.sum(0, keepdims=False).cast(T, "rint")}
