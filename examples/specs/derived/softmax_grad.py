"""SoftmaxGrad derived from SoftmaxV2 (../softmax.py) with the forward's output y saved: the softmax differentiates
as dx = y (dy - sum(dy y)) over the row (docs/design.md "Backward from forward": normalisations), so the operator
reads dy and y — the inputs of CANN's aclnnSoftmaxBackward (gradOutput, output) — and never recomputes the max or
the sum."""

from opgen.dsl import derive_grad

spec = derive_grad("../softmax.py", "SoftmaxGrad", aclnn="aclnnSoftmaxBackward", wrt=["x"], saved=["y"],
                   grads={"y": "dy"}, names={"x": "dx"})
