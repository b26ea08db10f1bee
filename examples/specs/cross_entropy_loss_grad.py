"""CrossEntropyLossGrad (aclnnCrossEntropyLossGrad) with class-index targets, reduction 'none': the gradient of
CrossEntropyLoss's per-row loss with respect to its input, from the saved logProb [N, C]:
xGrad[n, c] = s_n * p_c - (c == target[n] ? s_n : 0) + g_n * eps / C * (p_c * sum_j weight[j] - weight[c]),
p = exp(logProb[n]), s_n = (1 - eps) * g_n * weight[target[n]], g_n = gradLoss[n], eps = labelSmoothing (weight
absent: 1), and 0 on a row whose target is ignoreIndex.

The second term is a scatter-add along the row (one index per row): the kernel checks 0 <= target < C (Trap()
otherwise), compares the row's lane indices (CreateVecIndex) with the target and selects s_n there. Not declared
here: reduction 'mean' / 'sum' (a 0-d gradLoss), the z-loss gradient inputs. ignoreIndex is
CANN's int64, read by the kernel as fp32 (exact while C <= 2^24: docs/design.md "Rows family: integer attributes").
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i64
from opgen.dsl.checks import index_in_range

spec = OpSpec("CrossEntropyLossGrad", aclnn="aclnnCrossEntropyLossGrad", socs=(A2, A3), round="rint",
              doc="Gradient of the cross-entropy loss (reduction none) with respect to the logits.")
N = spec.dim("N")
C = spec.dim("C", max=131072)
(T,) = spec.dtype_vars("T")

spec.input("gradLoss", T, [N])
spec.input("logProb", T, [N, C])
spec.input("target", i64, [N])
spec.input("weight", f32, [C], optional=True, doc="weightOptional: per-class weights; absent = ones")
spec.attr("ignoreIndex", int, -100, doc="a target value whose row gets no gradient (an integer)")
spec.attr("labelSmoothing", float, 0.0, doc="epsilon of the forward: the target's share 1 - epsilon, every class's "
          "epsilon / C")
spec.output("xGrad", T, [N, C])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "loss")


spec.check("target", index_in_range("target", "C", ignore="ignoreIndex"), on="device")   # device data: the kernel traps


@spec.body
def _(b, gradLoss, logProb, target, weight, ignoreIndex, labelSmoothing):
    keep = target.ne(ignoreIndex).cast(i64)
    t = target * keep                       # an ignored row reads class 0, then counts 0
    g = gradLoss.f32() * keep.f32()
    p = b.exp(logProb.f32())
    if weight is None:                      # every class weighs 1: sum_c w_c = C
        s = g * (1.0 - labelSmoothing)
        smooth = (p * C - 1.0) * (g * (labelSmoothing / C)).reshape([N, 1])
    else:
        s = g * (1.0 - labelSmoothing) * b.gather(weight, t, axis=0)
        total = weight.broadcast_to([N, C]).sum(-1, keepdims=False)   # sum_c w_c, per row
        smooth = (p * total.reshape([N, 1]) - weight) * (g * (labelSmoothing / C)).reshape([N, 1])
    # the smoothing terms only when labelSmoothing != 0 (torch / CANN), a runtime guard: the kernel skips the weight's
    # class sum and column reads at 0 (docs/design.md "Runtime guards"); -0.0: x + -0.0 is x
    dx = p * s.reshape([N, 1]) - b.scatter_add(t, s, axis=1, size=C) + b.where(labelSmoothing.ne(0.0), smooth, -0.0)
    return {"xGrad": dx.cast(T, "rint")}
