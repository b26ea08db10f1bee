"""CrossEntropyLossGrad derived from CrossEntropyLoss (../cross_entropy_loss.py), with the saved log_prob: the
log-softmax differentiates as g - exp(log_prob) * sum(g) and the row max it subtracts carries no gradient
(docs/design.md "Backward from forward": normalisations), so the derived operator reads gradLoss, target, weight
and log_prob, never the logits — the inputs of CANN's aclnnCrossEntropyLossGrad (examples/specs/cross_entropy_loss_grad.py
is the same operator written by hand). The forward's device check of the targets (0 <= t < C or ignore_index) comes
with it: the derived operator takes the same target tensor. The forward's reduction and z-loss attributes accept
one value each ('none', 0.0, false: the body is written for it), so the derived operator reads none of them and
does not declare them; its new names (gradLoss, xGrad) are not CANN's grad_loss / x_grad (the hand-written
CrossEntropyLossGrad still spells them so)."""

from opgen.dsl import derive_grad

spec = derive_grad("../cross_entropy_loss.py", "CrossEntropyLossGrad", aclnn="aclnnCrossEntropyLossGrad",
                   wrt=["input"], saved=["log_prob"], grads={"loss": "gradLoss"}, names={"input": "xGrad"})

