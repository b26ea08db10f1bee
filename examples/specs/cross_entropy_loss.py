"""CrossEntropyLoss (aclnnCrossEntropyLoss) with class-index targets, reduction 'none': per row n of input [N, C],
logProb[n, c] = x[n, c] - lse_n with lse_n = log(sum_c exp(x[n, c])), and
lossOut[n] = -(1 - eps) * weight[target[n]] * logProb[n, target[n]] - eps / C * sum_c weight[c] * logProb[n, c]
(eps = labelSmoothing; weight absent: 1), 0 where target[n] == ignoreIndex.

The target is one int64 index per row: the kernel reads it on the scalar unit, checks 0 <= target < C or the
ignored index (the spec's device check: Trap() otherwise; the aclnn layer cannot read device data) and picks
logProb[n, target[n]] and weight[target[n]] by comparing the row's lane indices (CreateVecIndex) with it. An ignored row gathers at class 0 and is multiplied by 0 (a row whose
logProb there is -inf would give NaN, not 0). Not declared here: reduction 'mean' / 'sum' (a 0-d lossOut), the
z-loss outputs (zloss, lseForZloss). ignoreIndex is a float attribute here (CANN: int64; the
rows kernel reads float attributes), compared exactly for integers below 2^24.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32, i64

spec = OpSpec("CrossEntropyLoss", aclnn="aclnnCrossEntropyLoss", socs=(A2, A3), round="rint",
              doc="Cross-entropy loss of logits against class-index targets (reduction none).")
N = spec.dim("N")
C = spec.dim("C", max=131072)
(T,) = spec.dtype_vars("T")

spec.input("input", T, [N, C])
spec.input("target", i64, [N])
spec.input("weight", f32, [C], optional=True, doc="weightOptional: per-class weights; absent = ones")
spec.attr("ignoreIndex", float, -100.0, doc="a target value that contributes no loss (an integer)")
spec.attr("labelSmoothing", float, 0.0, doc="epsilon: the target's share 1 - epsilon, every class's epsilon / C")
spec.output("lossOut", T, [N])
spec.output("logProb", T, [N, C])
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.package("ops-nn", "loss")


def _targets_in_range(arrays, env, attrs):
    """Every target is a class index 0 <= t < C or the ignored index (device data: the kernel traps otherwise)."""
    t, c, skip = arrays["target"], env["C"], attrs["ignoreIndex"]
    bad = ((t < 0) | (t >= c)) & (t != skip)
    if bad.any():
        n = int(bad.nonzero()[0][0])
        return f"target[{n}] = {int(t[n])} is outside [0, {c}) and is not ignoreIndex {skip:g}"
    return None


spec.check("target", _targets_in_range, on="device")


@spec.body
def _(b, input, target, weight, ignoreIndex, labelSmoothing):
    x = input.f32()
    z = x - x.max(-1)
    lp = z - b.log(b.exp(z).sum(-1).broadcast_to([N, C]))
    keep = target.f32().ne(ignoreIndex).cast(i64)
    t = target * keep                       # an ignored row reads class 0, then counts 0
    picked = b.gather(lp, t, axis=1)
    every = (lp if weight is None else lp * weight).sum(-1, keepdims=False)
    if weight is not None:                  # absent: every class weighs 1
        picked = picked * b.gather(weight, t, axis=0)
    smooth = labelSmoothing / C             # torch / CANN: (1 - eps) * nll + eps / C * sum_c -w_c logProb_c
    loss = -(picked * (1.0 - labelSmoothing) + every * smooth) * keep.f32()
    return {"lossOut": loss.cast(T, "rint"), "logProb": lp.cast(T, "rint")}
