"""RmsNormGrad derived from RmsNorm (../rms_norm.py) by reverse-mode differentiation of its tensor IR: dx and dgamma
from dy, x, gamma and the saved rstd (reused, not recomputed). Compare the hand-written ../rms_norm_grad.py."""

from opgen.dsl import derive_grad

spec = derive_grad("../rms_norm.py", "RmsNormGrad", aclnn="aclnnRmsNormGrad", wrt=["x", "gamma"], saved=["rstd"],
                   grads={"y": "dy"}, names={"x": "dx", "gamma": "dgamma"})
