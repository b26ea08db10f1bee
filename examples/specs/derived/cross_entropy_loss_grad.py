"""CrossEntropyLossGrad derived from CrossEntropyLoss (../cross_entropy_loss.py), with the saved logProb: the
log-softmax differentiates as g - exp(logProb) * sum(g) and the row max it subtracts carries no gradient
(docs/design.md "Backward from forward": normalisations), so the derived operator reads gradLoss, target, weight
and logProb, never the logits — the inputs of CANN's aclnnCrossEntropyLossGrad (examples/specs/cross_entropy_loss_grad.py
is the same operator written by hand)."""

from opgen.dsl import derive_grad

spec = derive_grad("../cross_entropy_loss.py", "CrossEntropyLossGrad", aclnn="aclnnCrossEntropyLossGrad",
                   wrt=["input"], saved=["logProb"], grads={"lossOut": "gradLoss"}, names={"input": "xGrad"})


def _targets_in_range(arrays, env, attrs):
    """Every target is a class index 0 <= t < C or the ignored index (device data: the kernel traps otherwise). The
    forward's own check reads its logits, which this operator does not take, so derive_grad leaves it out."""
    t, c, skip = arrays["target"], arrays["logProb"].shape[-1], attrs["ignoreIndex"]
    bad = ((t < 0) | (t >= c)) & (t != skip)
    if bad.any():
        n = int(bad.nonzero()[0][0])
        return f"target[{n}] = {int(t[n])} is outside [0, {c}) and is not ignoreIndex {skip:g}"
    return None


spec.check("target", _targets_in_range, on="device")
