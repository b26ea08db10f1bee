"""CrossEntropyLossGrad derived from CrossEntropyLoss (../cross_entropy_loss.py), with the saved logProb: the
log-softmax differentiates as g - exp(logProb) * sum(g) and the row max it subtracts carries no gradient
(docs/design.md "Backward from forward": normalisations), so the derived operator reads gradLoss, target, weight
and logProb, never the logits — the inputs of CANN's aclnnCrossEntropyLossGrad (examples/specs/cross_entropy_loss_grad.py
is the same operator written by hand). The forward's device check of the targets (0 <= t < C or ignoreIndex) comes
with it: the derived operator takes the same target tensor."""

from opgen.dsl import derive_grad

spec = derive_grad("../cross_entropy_loss.py", "CrossEntropyLossGrad", aclnn="aclnnCrossEntropyLossGrad",
                   wrt=["input"], saved=["logProb"], grads={"lossOut": "gradLoss"}, names={"input": "xGrad"})

