"""CrossEntropyLossGrad (aclnnCrossEntropyLossGrad) with class-index targets, reduction 'none': the gradient of
CrossEntropyLoss's per-row loss with respect to its input, from the saved logProb [N, C]:
xGrad[n, c] = s_n * exp(logProb[n, c]) - (c == target[n] ? s_n : 0), s_n = gradLoss[n] * weight[target[n]]
(weight absent: 1), and 0 on a row whose target is ignoreIndex.

The second term is a scatter-add along the row (one index per row): the kernel checks 0 <= target < C (Trap()
otherwise), compares the row's lane indices (CreateVecIndex) with the target and selects s_n there. Not declared
here: reduction 'mean' / 'sum' (a 0-d gradLoss), labelSmoothing, the z-loss gradient inputs. ignoreIndex is a
float attribute here (CANN: int64).
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i64

spec = OpSpec("CrossEntropyLossGrad", aclnn="aclnnCrossEntropyLossGrad", socs=(A2, A3), round="rint",
              doc="Gradient of the cross-entropy loss (reduction none) with respect to the logits.")
N = spec.dim("N")
C = spec.dim("C", max=131072)
(T,) = spec.dtype_vars("T")

spec.input("gradLoss", T, [N])
spec.input("logProb", T, [N, C])
spec.input("target", i64, [N])
spec.input("weight", f32, [C], optional=True, doc="weightOptional: per-class weights; absent = ones")
spec.attr("ignoreIndex", float, -100.0, doc="a target value whose row gets no gradient (an integer)")
spec.output("xGrad", T, [N, C])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "loss")


def _targets_in_range(arrays, env, attrs):
    """Every target is a class index 0 <= t < C or the ignored index (device data: the kernel traps otherwise)."""
    t, c, skip = arrays["target"], arrays["logProb"].shape[-1], attrs["ignoreIndex"]
    bad = ((t < 0) | (t >= c)) & (t != skip)
    if bad.any():
        n = int(bad.nonzero()[0][0])
        return f"target[{n}] = {int(t[n])} is outside [0, {c}) and is not ignoreIndex {skip:g}"
    return None


spec.check("target", _targets_in_range, on="device")


@spec.body
def _(b, gradLoss, logProb, target, weight, ignoreIndex):
    keep = target.f32().ne(ignoreIndex).cast(i64)
    t = target * keep                       # an ignored row reads class 0, then counts 0
    s = gradLoss.f32() * keep.f32()
    if weight is not None:                  # absent: every class weighs 1
        s = s * b.gather(weight, t, axis=0)
    dx = b.exp(logProb.f32()) * s.reshape([N, 1]) - b.scatter_add(t, s, axis=1, size=C)
    return {"xGrad": dx.cast(T, "rint")}
